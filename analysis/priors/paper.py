"""The pieces of Cluster Admission App. B that are the paper's own choices, kept apart from the fits.

* ``alpha`` by the paper's criterion (App. B.2): the plain mean absolute distance between each
  deployment's normalised scale-out rate ``r * L**alpha`` and their average, with the mean core
  lifetime ``L`` in **hours**. The criterion is not scale-free (changing the time unit multiplies
  every normalised rate by ``unit**alpha``), so the unit is part of the result and is stated.
* the two zero-event probabilities (App. B.1): a deployment that never scaled out gets the rate at
  which seeing no scale-out has probability ``p_rate``; one whose scale-outs never added more than
  one core gets the size parameter at which that has probability ``p_size``. Both are calibrated by
  minimising the discrete Cramér–von Mises distance between the deployment sizes (cores) of the
  data and of deployments drawn from the fitted model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import optimize, special

FloatArray = npt.NDArray[np.float64]

#: the time unit of alpha's criterion (the lifetimes in the MAD are in hours)
ALPHA_TIME_UNIT = "hour"
ALPHA_BOUNDS = (-3.0, 3.0)
#: p_rate and p_size candidates of the calibration (both in (0, 1))
P_GRID: tuple[float, ...] = (0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95)
#: simulated deployments per real one in the calibration
CALIBRATION_REPLICATES = 4


def alpha_by_min_mad_paper(
    scaleout_rate_per_hour: FloatArray,
    lifetime_rate_per_hour: FloatArray,
    bounds: tuple[float, float] = ALPHA_BOUNDS,
) -> float:
    """The alpha minimising the plain MAD of ``r * (1/lambda)**alpha`` (lifetimes in hours)."""
    r = np.asarray(scaleout_rate_per_hour, dtype=float)
    log_life = -np.log(np.asarray(lifetime_rate_per_hour, dtype=float))

    def objective(alpha: float) -> float:
        v = r * np.exp(alpha * log_life)
        return float(np.abs(v - v.mean()).mean())

    # coarse grid first: the MAD is not guaranteed unimodal, and a bracket keeps it deterministic
    grid = np.linspace(bounds[0], bounds[1], 61)
    best = float(grid[int(np.argmin([objective(float(a)) for a in grid]))])
    step = float(grid[1] - grid[0])
    res = optimize.minimize_scalar(
        objective,
        bounds=(max(bounds[0], best - step), min(bounds[1], best + step)),
        method="bounded",
        options={"xatol": 1e-5},
    )
    return float(res.x)


def discrete_cvm_distance(data: FloatArray, model: FloatArray) -> float:
    """Discrete Cramér–von Mises distance ``sum_x (F_data(x) - F_model(x))^2 p_model(x)``.

    The form of Choulakian, Lockhart and Stephens (1994) for integer-valued data, with the model's
    probabilities ``p_model`` estimated by the frequencies of the simulated sample; ``x`` runs over
    every value seen in either sample.
    """
    d = np.sort(np.asarray(data, dtype=float))
    m = np.sort(np.asarray(model, dtype=float))
    support = np.unique(np.concatenate([d, m]))
    f_data = np.searchsorted(d, support, side="right") / len(d)
    f_model = np.searchsorted(m, support, side="right") / len(m)
    p_model = np.diff(np.concatenate([[0.0], f_model]))
    return float(np.sum((f_data - f_model) ** 2 * p_model))


@dataclass(frozen=True)
class SizeModel:
    """The fitted two-stage model's parts that decide how many cores a deployment adds.

    ``lifetime_*`` and ``normalised_*``/``size_*`` are Gamma(shape, rate) priors; ``alpha`` the
    exponent of the mean core lifetime (hours) in the scale-out rate.
    """

    lifetime_shape: float
    lifetime_rate: float
    normalised_shape: float
    normalised_rate: float
    alpha: float
    size_shape: float
    size_rate: float


@dataclass(frozen=True)
class SizeData:
    """Per deployment: cores at arrival, hours it could scale out, and its total cores."""

    arrival_cores: FloatArray
    observed_hours: FloatArray
    n_cores: FloatArray


def simulated_scaleouts(model: SizeModel, data: SizeData, uniforms: FloatArray) -> FloatArray:
    """Scale-out counts ``Poisson(rho lambda^alpha T)`` of the simulated deployments.

    Deployment ``i`` (row ``i mod n`` of ``data``) keeps the hours it could scale out; its lifetime
    rate and normalised rate are quantile transforms of fixed uniforms (common random numbers across
    the grid), the counts come from a generator seeded by those uniforms, so the distance is a
    deterministic function of p.
    """
    reps = uniforms.shape[0] // len(data.arrival_cores)
    hours = np.tile(data.observed_hours, reps)
    lam = special.gammaincinv(model.lifetime_shape, uniforms[:, 0]) / model.lifetime_rate
    rho = special.gammaincinv(model.normalised_shape, uniforms[:, 1]) / model.normalised_rate
    # Poisson draws from a generator seeded by the uniforms' own seed column: scipy's Poisson ppf
    # is ~100x slower at these means, and a fixed seed keeps the distance deterministic in p
    rng = np.random.default_rng(int(uniforms[0, 3] * 2**31))
    out: FloatArray = rng.poisson(rho * lam**model.alpha * hours).astype(np.float64)
    return out


def simulated_sizes_from(
    model: SizeModel, data: SizeData, uniforms: FloatArray, scaleouts: FloatArray
) -> FloatArray:
    """Total cores: arrival cores + scale-outs + ``Poisson(s N)`` extra cores (1 + Poisson(s) each)."""
    reps = uniforms.shape[0] // len(data.arrival_cores)
    size = special.gammaincinv(model.size_shape, uniforms[:, 2]) / model.size_rate
    rng = np.random.default_rng(int(uniforms[0, 2] * 2**31))
    extra = rng.poisson(size * scaleouts).astype(np.float64)
    out: FloatArray = np.tile(data.arrival_cores, reps) + scaleouts + extra
    return out


def simulated_sizes(model: SizeModel, data: SizeData, uniforms: FloatArray) -> FloatArray:
    """Total cores of deployments drawn from ``model``, ``uniforms.shape[0] / n`` per real one.

    Each simulated deployment keeps a real one's arrival cores and scale-out hours, so the
    comparison isolates the scale-out part of the model, the only part p_rate and p_size change.
    """
    scaleouts = simulated_scaleouts(model, data, uniforms)
    return simulated_sizes_from(model, data, uniforms, scaleouts)


def calibration_uniforms(n: int, seed: int, replicates: int = CALIBRATION_REPLICATES) -> FloatArray:
    """The fixed uniforms of :func:`simulated_sizes` (seeded; strictly inside (0, 1))."""
    rng = np.random.default_rng([seed, 4004])
    u: FloatArray = rng.uniform(1e-12, 1.0 - 1e-12, size=(n * replicates, 4))
    return u


@dataclass(frozen=True)
class Calibration:
    """The chosen (p_rate, p_size), its distance and the whole grid searched."""

    p_rate: float
    p_size: float
    distance: float
    #: (p_rate, p_size, distance) of every grid point
    grid: tuple[tuple[float, float, float], ...]


def calibrate(
    distance: Callable[[float, float], float], grid: Sequence[float] = P_GRID
) -> Calibration:
    """The grid point (p_rate, p_size) with the smallest ``distance`` (first on ties)."""
    points = tuple((pr, ps, distance(pr, ps)) for pr in grid for ps in grid)
    best = min(points, key=lambda t: t[2])
    return Calibration(p_rate=best[0], p_size=best[1], distance=best[2], grid=points)
