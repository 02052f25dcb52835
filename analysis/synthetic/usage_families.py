"""Per-task distributions of ``sampled_cpu_usage`` (inst) and ``cpu_rate`` (avg) for the generator.

Every task with usage draws its inst samples, one per 5-minute window, from one *family*
(Janus & Rzadca §3.5 finds recurring histogram shapes; these are five of them, scaled to the real
trace's usage: mostly below 0.1 core, a heavy right tail). The per-task
parameters are drawn from narrow ranges so that k-means on the 100-bin histograms
(docs/methods.md §1.9, §2.4) can recover the families. A shifting task switches, at a recorded window,
to a distribution whose support is disjoint from (or far from) the original, so a two-sample
KS test on 12 + 12 windows either side rejects almost surely (§2.3).

avg (the 5-minute mean) is ``(1 - a) * mu + a * y`` with ``y`` a second, independent draw from
the same distribution and ``a`` in [0.5, 0.8] per task: its mean is the inst mean ``mu`` and its
std is ``a`` times the inst std, so inst std > avg std (Janus & Rzadca §3.3) and over a task
mean(avg) ~ mean(inst) (§3.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: family names in code order; the code is the index
FAMILIES: tuple[str, ...] = ("mostly_zero", "exponential", "uniform", "bimodal", "gamma")
#: share of usage-producing tasks per family, for production (priority >= 9) and other tasks (the
#: rest of tasks, IDLE_SHARE, are "idle"). Janus & Rzadca Fig. 4: three near-zero clusters hold 46.5% of
#: long tasks; mostly_zero and exponential (nearly all in the first 0.01-core bins) play that part.
#: Production leans to the heavier families: Zhu et al. §4.1 finds it is 6% of tasks but uses > 80%
#: of the CPU
FAMILY_SHARES: dict[str, tuple[float, ...]] = {
    "production": (0.15, 0.23, 0.20, 0.17, 0.25),
    "non_production": (0.38, 0.34, 0.12, 0.10, 0.06),
}
#: share of tasks whose inst is 0 in every window (the analysis drops them, docs/methods.md §1.8)
IDLE_SHARE = 0.05
IDLE = -1
#: mean of the idle tasks' avg (Exponential): a busy-wait-free daemon still shows a trickle
IDLE_AVG_MEAN = 0.0005

#: avg = (1 - a) * mu + a * y; a ~ U(AVG_WEIGHT_RANGE) per task, so std(avg) = a std(inst). Janus & Rzadca
#: §3.3: the avg slope and intercept (0.31, 0.010) are ~0.86 and ~0.67 of the inst ones (0.36,
#: 0.015); a above 0.8 would let the sample std of avg exceed that of inst for many tasks with
#: ~100 windows, against Fig. 2 (inst is the more variable), so the mean weight is 0.65
AVG_WEIGHT_RANGE = (0.5, 0.8)

#: per family, the (low, high) range of each uniformly drawn task parameter (params[:, j])
PARAM_RANGES: dict[int, tuple[tuple[float, float], ...]] = {
    0: ((0.15, 0.25), (0.075, 0.12)),
    1: ((0.008, 0.016),),
    2: ((0.03, 0.035), (0.02, 0.03)),
    3: ((0.4, 0.6), (0.022, 0.026), (0.07, 0.08)),
    4: ((0.07, 0.10), (5.0, 8.0)),
}

#: documented parameter ranges (TRUTH.json): pre-shift and post-shift distributions, in cores
#: (1 = the largest machine). Janus & Rzadca §3.5: mean usage per long task ~0.027 (Table 1, mu_j ~0.27 at
#: N = 10) and "the great majority" of histograms are 0 beyond 0.30, so every family lives below
#: ~0.3. A shift is a phase change (a burst, or a quiet spell) onto a support disjoint from (or,
#: for a few percent of the mass, overlapping) the original, so KS on 12 + 12 windows rejects.
FAMILY_DOC: dict[str, dict[str, str]] = {
    "mostly_zero": {
        "inst": "0 with prob 1-q, else Uniform(0, h); q ~ U(0.15, 0.25), h ~ U(0.075, 0.12)",
        "after_shift": "Uniform(0.003, 0.009) (busy-waiting: nonzero, but in the same 0.01-core bin)",
    },
    "exponential": {
        "inst": "Exponential(mean m); m ~ U(0.008, 0.016)",
        "after_shift": "0 (a quiet spell)",
    },
    "uniform": {
        "inst": "Uniform(a, a + w); a ~ U(0.03, 0.035), w ~ U(0.02, 0.03)",
        "after_shift": "Uniform(0, 0.01)",
    },
    "bimodal": {
        "inst": "w: Normal(m1, 0.0015), 1-w: Normal(m2, 0.006); w ~ U(0.4, 0.6), "
        "m1 ~ U(0.022, 0.026), m2 ~ U(0.07, 0.08); clipped at 0",
        "after_shift": "0 (a quiet spell)",
    },
    "gamma": {
        "inst": "Gamma(shape k, scale m / k) (mean m, std m / sqrt(k): the heavy right tail of "
        "Janus & Rzadca Fig. 6); m ~ U(0.07, 0.10), k ~ U(5, 8)",
        "after_shift": "0 (a quiet spell)",
    },
}

_POST_ZERO = (0.003, 0.009)
_POST_UNIFORM = (0.0, 0.01)
_BIMODAL_SIGMAS = (0.0015, 0.006)


@dataclass(frozen=True)
class TaskFamilies:
    """Per-task family codes (IDLE = -1), four parameters and the avg weight ``a``."""

    family: npt.NDArray[np.int8]
    params: FloatArray  # shape (n_tasks, 4); meaning per family in FAMILY_DOC
    avg_weight: FloatArray


def task_families(rng: np.random.Generator, production: npt.NDArray[np.bool_]) -> TaskFamilies:
    """Draw a family and its parameters for each task (``production``: one flag per task)."""
    n_tasks = int(production.shape[0])
    cum = {}
    for name, fam_shares in FAMILY_SHARES.items():
        shares = np.array((*fam_shares, 0.0)) * (1.0 - IDLE_SHARE)
        shares[-1] = IDLE_SHARE
        cum[name] = np.cumsum(shares / shares.sum())
    cdf = np.where(production[:, None], cum["production"], cum["non_production"])
    u_family = rng.random(n_tasks)
    code = np.minimum((u_family[:, None] >= cdf).sum(axis=1), len(FAMILIES))
    family = np.where(code == len(FAMILIES), IDLE, code).astype(np.int8)
    u = rng.random((n_tasks, 4))
    params = np.zeros((n_tasks, 4))
    for code_f, rs in PARAM_RANGES.items():
        rows = family == code_f
        for j, (lo, hi) in enumerate(rs):
            params[rows, j] = lo + (hi - lo) * u[rows, j]
    lo_a, hi_a = AVG_WEIGHT_RANGE
    avg_weight = lo_a + (hi_a - lo_a) * rng.random(n_tasks)
    return TaskFamilies(family=family, params=params, avg_weight=avg_weight)


def inst_samples(
    rng: np.random.Generator,
    family: npt.NDArray[np.int8],
    params: FloatArray,
    shifted: npt.NDArray[np.bool_],
) -> FloatArray:
    """One inst draw per row, given each row's family, parameters and shift state (vectorised)."""
    n = int(family.shape[0])
    out = np.zeros(n)
    u: FloatArray = rng.random(n)
    z: FloatArray = rng.standard_normal(n)
    # one Gamma draw per row (shape 1 = a standard exponential outside the gamma family)
    shape = np.where(family == 4, params[:, 1], 1.0)
    g: FloatArray = rng.standard_gamma(shape)
    p0: FloatArray = params[:, 0]
    p1: FloatArray = params[:, 1]
    p2: FloatArray = params[:, 2]
    pre = ~shifted
    # mostly zero: nonzero with prob q
    m = (family == 0) & pre
    nz = m & (u < p0)
    out[nz] = p1[nz] * (u[nz] / p0[nz])  # reuse u: given u < q, u / q is U(0, 1)
    m = (family == 0) & shifted
    out[m] = _POST_ZERO[0] + (_POST_ZERO[1] - _POST_ZERO[0]) * u[m]
    m = (family == 1) & pre
    out[m] = p0[m] * g[m]
    m = (family == 2) & pre
    out[m] = p0[m] + p1[m] * u[m]
    m = (family == 2) & shifted
    out[m] = _POST_UNIFORM[0] + (_POST_UNIFORM[1] - _POST_UNIFORM[0]) * u[m]
    m = (family == 3) & pre
    low = u < p0
    out[m] = np.where(low[m], p1[m] + _BIMODAL_SIGMAS[0] * z[m], p2[m] + _BIMODAL_SIGMAS[1] * z[m])
    m = (family == 4) & pre
    out[m] = p0[m] / p1[m] * g[m]
    # exponential, bimodal and gamma after a shift: 0 (already)
    return np.maximum(out, 0.0)


def family_moments(
    family: npt.NDArray[np.int8], params: FloatArray, shifted: bool
) -> tuple[FloatArray, FloatArray]:
    """Exact mean and variance of the inst distribution per task (pre- or post-shift).

    The clipping at 0 of the Normal components is ignored: every mean is >= 5 sigma above 0.
    """
    n = family.shape[0]
    mean = np.zeros(n)
    var = np.zeros(n)
    p0, p1, p2 = params[:, 0], params[:, 1], params[:, 2]
    m = family == 0
    if shifted:
        mean[m], var[m] = _uniform_moments(_POST_ZERO)
    else:
        mean[m] = p0[m] * p1[m] / 2
        var[m] = p0[m] * p1[m] ** 2 / 3 - mean[m] ** 2
    m = family == 1
    if not shifted:  # after a shift: 0
        mean[m] = p0[m]
        var[m] = p0[m] ** 2
    m = family == 2
    if shifted:
        mean[m], var[m] = _uniform_moments(_POST_UNIFORM)
    else:
        mean[m] = p0[m] + p1[m] / 2
        var[m] = p1[m] ** 2 / 12
    m = family == 3
    if not shifted:  # after a shift: 0
        s1, s2 = _BIMODAL_SIGMAS
        w = p0[m]
        mean[m] = w * p1[m] + (1 - w) * p2[m]
        second = w * (s1**2 + p1[m] ** 2) + (1 - w) * (s2**2 + p2[m] ** 2)
        var[m] = second - mean[m] ** 2
    m = family == 4
    if not shifted:  # Gamma(k, m / k): mean m, variance m^2 / k; after a shift: 0
        mean[m] = p0[m]
        var[m] = p0[m] ** 2 / p1[m]
    return mean, var


def _uniform_moments(bounds: tuple[float, float]) -> tuple[float, float]:
    lo, hi = bounds
    return (lo + hi) / 2, (hi - lo) ** 2 / 12


def mixture_mean_std(
    weight_post: FloatArray,
    mean_pre: FloatArray,
    var_pre: FloatArray,
    mean_post: FloatArray,
    var_post: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """Mean and std of the two-component mixture (the share ``weight_post`` of windows shifted)."""
    w = weight_post
    mean = (1 - w) * mean_pre + w * mean_post
    second = (1 - w) * (var_pre + mean_pre**2) + w * (var_post + mean_post**2)
    return mean, np.sqrt(np.maximum(second - mean**2, 0.0))


@dataclass(frozen=True)
class TaskMoments:
    """Exact per-task moments of inst and avg over the task's windows (before/after a shift).

    ``avg_mean_pre`` / ``avg_mean_post`` are the mean ``cpu_rate`` of one window before / after
    the shift; idle tasks have inst 0 and avg Exponential(IDLE_AVG_MEAN) throughout.
    """

    inst_mean: FloatArray
    inst_std: FloatArray
    avg_mean: FloatArray
    avg_std: FloatArray
    avg_mean_pre: FloatArray
    avg_mean_post: FloatArray


def task_moments(
    fam: TaskFamilies,
    n_windows: IntArray,
    shifts: npt.NDArray[np.bool_],
    shift_window: IntArray,
) -> TaskMoments:
    """Moments of each task's inst and avg, weighted by its windows before/after the shift."""
    mean_pre, var_pre = family_moments(fam.family, fam.params, shifted=False)
    mean_post, var_post = family_moments(fam.family, fam.params, shifted=True)
    safe_n = np.maximum(n_windows, 1)
    w_post = np.where(shifts, (n_windows - shift_window) / safe_n, 0.0)
    inst_mean, inst_std = mixture_mean_std(w_post, mean_pre, var_pre, mean_post, var_post)
    a2 = fam.avg_weight**2
    avg_mean, avg_std = mixture_mean_std(w_post, mean_pre, a2 * var_pre, mean_post, a2 * var_post)
    idle = fam.family == IDLE
    inst_mean[idle] = 0.0
    inst_std[idle] = 0.0
    # an Exponential's std equals its mean
    avg_mean[idle] = IDLE_AVG_MEAN
    avg_std[idle] = IDLE_AVG_MEAN
    return TaskMoments(
        inst_mean=inst_mean,
        inst_std=inst_std,
        avg_mean=avg_mean,
        avg_std=avg_std,
        avg_mean_pre=np.where(idle, IDLE_AVG_MEAN, mean_pre),
        avg_mean_post=np.where(idle, IDLE_AVG_MEAN, mean_post),
    )
