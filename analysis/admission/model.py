"""The deployment model of Cluster Admission §2.1 on the exported Gamma priors, and its closed-form moments.

Units: hours throughout. A deployment has a core-lifetime rate ``lambda`` (1/hour), a normalised
scale-out rate ``rho`` with scale-out rate ``r = rho * lambda**alpha`` (1/hour), a scale-out size
parameter ``s`` (a scale-out adds ``1 + Poisson(s)`` cores) and a maximal lifetime that is
exponential with rate ``nu * lambda`` (``nu`` = the exported shutdown rate, per mean core lifetime).

The provider's belief over one deployment is three independent Gammas (``lambda``, ``rho``, ``s``),
the priors updated conjugately with what the deployment did (:class:`Belief`). Given a belief and
the current size, :func:`size_moments` gives the mean and variance of the size ``u`` hours later in
closed form (Cluster Admission App. C; the derivation is in ``docs/admission.md``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.export.document import ParamsDocument
from tracelab.analysis.traces import azure2017

FloatArray = npt.NDArray[np.float64]
#: a float or an array of floats: the closed form is written once for both
Num = TypeVar("Num", float, FloatArray)

TRACE = azure2017.ID
STAGE = "priors"

#: params record names per ``--prior`` choice: lifetime, normalised scale-out, size, alpha, shutdown
RECORD_NAMES: dict[str, tuple[str, str, str, str, str]] = {
    "marginal": (
        "core_lifetime_rate_prior_marginal",
        "normalised_scaleout_rate_prior_marginal",
        "scaleout_size_prior_marginal",
        "scaleout_alpha_marginal",
        "deployment_shutdown_marginal",
    ),
    "two-stage": (
        "core_lifetime_rate_prior",
        "normalised_scaleout_rate_prior",
        "scaleout_size_prior",
        "scaleout_alpha",
        "deployment_shutdown",
    ),
}
ARRIVAL_RECORD = "deployment_arrival_rate"


@dataclass(frozen=True)
class AdmissionPriors:
    """The population model one simulation draws deployments from (hours)."""

    lifetime_shape: float
    #: rate of the Gamma prior of lambda, in hours (lambda is per hour)
    lifetime_rate: float
    scaleout_shape: float
    scaleout_rate: float
    alpha: float
    size_shape: float
    size_rate: float
    #: maximal lifetime ~ Exp(shutdown_per_lifetime * lambda): per mean core lifetime
    shutdown_per_lifetime: float
    arrival_rate_per_hour: float
    #: the params records used, in the order of RECORD_NAMES plus the arrival record
    records: tuple[str, ...]


def _gamma(doc: ParamsDocument, name: str) -> tuple[float, float]:
    return doc.number(TRACE, STAGE, name, "shape"), doc.number(TRACE, STAGE, name, "rate")


def _scalar(doc: ParamsDocument, name: str, parameter: str, need: str) -> float:
    return doc.number(TRACE, STAGE, name, parameter, need)


def admission_priors(
    doc: ParamsDocument, prior: str, arrival_rate_per_hour: float | None = None
) -> AdmissionPriors:
    """The model from the params document: the joint marginal fit or the two-stage one."""
    if prior not in RECORD_NAMES:
        raise TracelabError(f"--prior {prior}: must be one of {', '.join(RECORD_NAMES)}")
    life, scale, size, alpha, shutdown = RECORD_NAMES[prior]
    a_l, b_l = _gamma(doc, life)
    a_r, b_r = _gamma(doc, scale)
    a_s, b_s = _gamma(doc, size)
    rate = arrival_rate_per_hour
    if rate is None or rate <= 0:
        rate = _scalar(doc, ARRIVAL_RECORD, "rate", "positive")
    return AdmissionPriors(
        lifetime_shape=a_l,
        lifetime_rate=b_l,
        scaleout_shape=a_r,
        scaleout_rate=b_r,
        alpha=_scalar(doc, alpha, "alpha", "finite"),
        size_shape=a_s,
        size_rate=b_s,
        shutdown_per_lifetime=_scalar(doc, shutdown, "rate", "non-negative"),
        arrival_rate_per_hour=rate,
        records=(life, scale, size, alpha, shutdown, ARRIVAL_RECORD),
    )


#: lgamma(shape + power) - lgamma(shape) per (shape, power): a belief's shape is the prior's plus
#: whole core deaths, so few values recur at every event of a run
_LGAMMA_DIFFS: dict[tuple[float, float], float] = {}


def mean_lambda_power(shape: float, rate: float, power: float) -> float:
    """E[lambda**power] under Gamma(shape, rate) (needs shape + power > 0)."""
    key = (shape, power)
    diff = _LGAMMA_DIFFS.get(key)
    if diff is None:
        if len(_LGAMMA_DIFFS) > _RATIOS_KEPT:
            _LGAMMA_DIFFS.clear()
        diff = _LGAMMA_DIFFS[key] = math.lgamma(shape + power) - math.lgamma(shape)
    return math.exp(diff - power * math.log(rate))


class Belief:
    """Gamma posteriors over one deployment's lambda, rho and s (Cluster Admission §2.2, App. C).

    Updated at the deployment's own events: every elapsed hour adds the core-hours to lambda's
    exposure (deaths are exponential), ``nu`` per hour for having survived the maximal lifetime
    (``exp(-nu lambda dt)`` is a Gamma kernel in lambda), and ``E[lambda**alpha]`` per hour to rho's
    exposure (scale-outs are Poisson with rate ``rho lambda**alpha``; lambda is plugged in by its
    posterior mean power, the one non-conjugate step).
    """

    __slots__ = ("a_lam", "a_rho", "a_s", "b_lam", "b_rho", "b_s", "t_last")

    def __init__(self, priors: AdmissionPriors, t_now: float) -> None:
        self.a_lam = priors.lifetime_shape
        self.b_lam = priors.lifetime_rate
        self.a_rho = priors.scaleout_shape
        self.b_rho = priors.scaleout_rate
        self.a_s = priors.size_shape
        self.b_s = priors.size_rate
        self.t_last = t_now

    def elapse(self, t_now: float, cores: int, nu: float, alpha: float) -> None:
        dt = t_now - self.t_last
        if dt > 0.0:
            self.b_rho += dt * mean_lambda_power(self.a_lam, self.b_lam, alpha)
            self.b_lam += (cores + nu) * dt
        self.t_last = t_now

    def observe_scaleout(self, cores: int) -> None:
        self.a_rho += 1.0
        self.observe_size(cores)

    def observe_size(self, cores: int) -> None:
        """A batch of ``cores`` = 1 + Poisson(s) cores: conjugate update of s."""
        self.a_s += cores - 1
        self.b_s += 1.0

    def snapshot(self, cores: int) -> tuple[float, ...]:
        """(cores, a_lam, b_lam, E rho, E rho^2, E s, E s^2, t): what size_moments needs."""
        e_rho = self.a_rho / self.b_rho
        e_s = self.a_s / self.b_s
        return (
            float(cores),
            self.a_lam,
            self.b_lam,
            e_rho,
            e_rho * (self.a_rho + 1.0) / self.b_rho,
            e_s,
            e_s * (self.a_s + 1.0) / self.b_s,
            self.t_last,
        )


SNAPSHOT_FIELDS = 8
#: a snapshot plus the two Gamma-function ratios of its lambda belief (:func:`extend_snapshot`)
EXTENDED_FIELDS = 10


def gamma_ratio(a: float, beta: float) -> float:
    """Gamma(a + beta) / Gamma(a), continued analytically to a + beta <= 0 (sign included).

    Single terms E[lambda**beta exp(-c lambda)] diverge when a + beta <= 0, but the weighted sums
    size_moments forms vanish to the needed order at lambda = 0 and converge; the continuation of
    Gamma gives their value.
    """
    z = a + beta
    if abs(z - round(z)) < 1e-7:
        # a pole of Gamma at a non-positive integer: move off it (the sum is continuous there)
        z += 1e-6
    # Gamma is negative on (-1, 0), (-3, -2), ...
    sign = 1.0 if z > 0.0 or math.floor(-z) % 2 == 1 else -1.0
    return sign * math.exp(math.lgamma(z) - math.lgamma(a))


#: Gamma ratios per (a_lam, alpha): a_lam is the prior shape plus whole core deaths, so few values
_RATIOS: dict[tuple[float, float], tuple[float, float]] = {}
_RATIOS_KEPT = 4096


def extend_snapshot(snap: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """The snapshot with Gamma(a+alpha-1)/Gamma(a) and Gamma(a+2alpha-2)/Gamma(a) appended: they
    depend on the deployment only, so they are computed once per snapshot, not per grid point."""
    key = (snap[1], alpha)
    ratios = _RATIOS.get(key)
    if ratios is None:
        if len(_RATIOS) > _RATIOS_KEPT:
            _RATIOS.clear()
        ratios = _RATIOS[key] = (
            gamma_ratio(key[0], alpha - 1.0),
            gamma_ratio(key[0], 2.0 * alpha - 2.0),
        )
    return (*snap, *ratios)


def _first_two_moments(
    coef: tuple[Num, ...], kq: Num, kq2: Num, t1: list[Num], t2: list[Num]
) -> tuple[Num, Num]:
    """E[N] and E[N^2] (App. C, ``docs/admission.md``) from the per-deployment coefficients
    (n, E rho, E rho^2, E s, E s^2, the two Gamma ratios) and the Gamma integrals:
    ``kq``, ``kq2`` = E[k q], E[k q^2]; ``t1[j]``, ``t2[j]`` = the lambda**(alpha-1) and
    lambda**(2 alpha-2) integrals at c = (nu + j) u without their Gamma ratio."""
    n, e_rho, e_rho2, e_s, e_s2, r1, r2 = coef
    a1 = r1 * (t1[0] - t1[1])
    a2 = r1 * (t1[0] - t1[2])
    a3 = r1 * (t1[1] - t1[2])
    a4 = r2 * (t2[0] - 2.0 * t2[1] + t2[2])
    rho_1s = e_rho * (1.0 + e_s)
    mean = n * kq + rho_1s * a1
    second = (
        n * (kq - kq2)
        + n * n * kq2
        + rho_1s * a1
        + 0.5 * e_rho * (e_s2 + 2.0 * e_s) * a2
        + 2.0 * n * rho_1s * a3
        + e_rho2 * (1.0 + 2.0 * e_s + e_s2) * a4
    )
    return mean, second


def size_moments(
    snap: FloatArray, times: FloatArray, nu: float, alpha: float
) -> tuple[FloatArray, FloatArray]:
    """Mean and variance of each deployment's size at absolute times (``(m, 8)`` or ``(m, 10)``
    extended snapshots x ``(p,)``).

    Given lambda, rho, s: initial cores survive with ``q = exp(-lambda u)``; scale-outs are Poisson
    with rate ``r``, batches ``1 + Poisson(s)`` each core surviving ``exp(-lambda (u - v))``; the
    deployment is still alive (maximal lifetime) with ``k = exp(-nu lambda u)``. The size is
    ``L * (Binomial(n, q) + compound Poisson)``; its first two moments given the parameters are
    integrated over the independent Gamma beliefs in closed form (``docs/admission.md``): every
    term is E[lambda**beta exp(-c lambda)] = Gamma(a+beta)/Gamma(a) b**a (b+c)**-(a+beta) with
    c = (nu + j) u, j = 0, 1, 2. Death at zero cores is not in the model the moments describe
    (the paper's S_t uses Jensen's inequality instead). :func:`point_moments` is the same formula
    for one deployment at one time in scalar arithmetic.
    """
    if snap.shape[1] == SNAPSHOT_FIELDS:
        ratios = [
            (gamma_ratio(a, alpha - 1.0), gamma_ratio(a, 2.0 * alpha - 2.0))
            for a in snap[:, 1].tolist()
        ]
        snap = np.hstack([snap, np.asarray(ratios, dtype=np.float64).reshape(-1, 2)])
    n = snap[:, 0:1]
    a = snap[:, 1:2]
    b = snap[:, 2:3]
    e_rho, e_rho2 = snap[:, 3:4], snap[:, 4:5]
    e_s, e_s2 = snap[:, 5:6], snap[:, 6:7]
    r1, r2 = snap[:, 8:9], snap[:, 9:10]
    u = np.maximum(times[None, :] - snap[:, 7:8], 0.0)
    log_b = np.log(b)
    # (b / (b + c_j))**a and (b + c_j)**-(alpha - 1) for j = 0, 1, 2
    logs = [np.log(b + (nu + j) * u) for j in range(3)]
    pa = [np.exp(a * (log_b - lg)) for lg in logs]
    pq = [np.exp((1.0 - alpha) * lg) for lg in logs]
    # E[lambda**(alpha-1) k (1-q)], k (1-q^2), k q (1-q); E[lambda**(2 alpha-2) k (1-q)^2]
    t1 = [pa[j] * pq[j] for j in range(3)]
    t2 = [t1[j] * pq[j] for j in range(3)]
    mean, second = _first_two_moments((n, e_rho, e_rho2, e_s, e_s2, r1, r2), pa[1], pa[2], t1, t2)
    var = np.maximum(second - mean * mean, 0.0)
    return mean, var


def point_moments(
    snap: tuple[float, ...], time: float, nu: float, alpha: float
) -> tuple[float, float]:
    """:func:`size_moments` of one extended snapshot at one time, in scalar arithmetic (a few
    microseconds; numpy's per-call overhead is larger than the work at one point)."""
    n, a, b, e_rho, e_rho2, e_s, e_s2, t0, r1, r2 = snap
    u = max(time - t0, 0.0)
    log_b = math.log(b)
    t1 = [0.0, 0.0, 0.0]
    t2 = [0.0, 0.0, 0.0]
    pa = [0.0, 0.0, 0.0]
    for j in range(3):
        lg = math.log(b + (nu + j) * u)
        pa[j] = math.exp(a * (log_b - lg))
        pq = math.exp((1.0 - alpha) * lg)
        t1[j] = pa[j] * pq
        t2[j] = t1[j] * pq
    mean, second = _first_two_moments((n, e_rho, e_rho2, e_s, e_s2, r1, r2), pa[1], pa[2], t1, t2)
    return mean, max(second - mean * mean, 0.0)


_MASK = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def counter_uniforms(keys: int | npt.NDArray[np.int64], first: int, count: int) -> FloatArray:
    """``counter_uniform(key, c)`` for ``c = first, ..., first + count - 1`` in one numpy pass:
    shape ``(count,)`` for one key, ``(len(keys), count)`` for an array of keys.

    numpy's uint64 arithmetic wraps modulo 2**64 like the masked Python integers, and
    ``(z >> 11) + 0.5`` is exact in float64, so the values are bit-identical to the scalar version
    (tested); a run draws ~10^5 of them, and one Python call per value was a tenth of its time.
    """
    c = np.arange(first + 1, first + count + 1, dtype=np.uint64)
    z = np.asarray(keys).astype(np.uint64)[..., None] + c * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z ^= z >> np.uint64(31)
    out: FloatArray = ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
    return out


def counter_stream(key: int, first: int = 1, block: int = 128) -> Iterator[float]:
    """``counter_uniform(key, first), counter_uniform(key, first + 1), ...`` drawn ``block`` at a
    time (numpy's per-call cost is that of a few dozen scalar values)."""
    counter = first
    while True:
        values: list[float] = counter_uniforms(key, counter, block).tolist()
        yield from values
        counter += block


def counter_uniform(key: int, counter: int) -> float:
    """Uniform on (0, 1) from (key, counter) by splitmix64: a deployment's own random stream.

    A stream per deployment keyed by the run's draws keeps its randomness the same whatever the
    policy does to other deployments (common random numbers across thresholds).
    """
    z = (key + (counter + 1) * 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    z ^= z >> 31
    return ((z >> 11) + 0.5) * 1.1102230246251565e-16
