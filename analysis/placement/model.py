"""The lifetime model of the placement stage: Lomax lifetimes from the exported Gamma prior.

tracelab's Azure fits (docs/methods.md §2.6) say: within a deployment, VM lifetimes are exponential with
rate ``lambda`` (1/hour), and ``lambda ~ Gamma(k, beta)`` across deployments (``beta`` in hours).
Integrating ``lambda`` out gives the Lomax (Pareto II) lifetime

    S(t) = P(T > t) = (beta / (beta + t)) ** k,

whose expected remaining lifetime *grows* with the age ``u`` already survived — the
"reprediction" of LAVA paper §3 (the conditional expectation E[T_r | T_u]):

    E[T - u | T > u] = (beta + u) / (k - 1)                      (k > 1).

The fitted shape is often at or below 1 (infinite mean), so the stage predicts the *restricted*
mean of the remaining lifetime over a horizon ``H`` (the window of the trace by default):

    E[min(T - u, H) | T > u] = (beta + u) / (k - 1) * (1 - ((beta + u) / (beta + u + H)) ** (k - 1))
    k = 1:                    (beta + u) * ln(1 + H / (beta + u)),

which tends to the unrestricted form as ``H`` grows (k > 1) and is finite for every k.

Deployment history (option): a deployment whose earlier VMs showed ``d`` deaths over ``E``
VM-hours of exposure has the conjugate posterior ``lambda ~ Gamma(k + d, beta + E)``; its next VM's
lifetime is Lomax with those parameters. The history is read when the VM is created; later
repredictions update only with the VM's own age, as the LAVA paper's model takes uptime as its one extra
feature.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.export.document import ParamsDocument
from tracelab.analysis.traces import azure2017

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

TRACE = azure2017.ID
PRIORS_STAGE = "priors"
HOUR_S = 3600.0

#: LAVA paper §4.2: LAS temporal-cost bucket boundaries, hours (0m, 30m, 60m, 90m, 2h … 168h)
LAS_BUCKETS_HOURS: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 12.0, 24.0, 168.0)
#: LAVA paper §4.3: LAVA lifetime classes LC1..LC4 end at 1 h, 10 h, 100 h, 1000 h
LAVA_CLASS_UPPER_HOURS: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0)
#: LAVA paper §5.3 (after Barbalho et al.): LA-Binary's short/long cutoff, hours
LA_BINARY_CUTOFF_HOURS = 2.0


@dataclass(frozen=True)
class LifetimePrior:
    """Gamma(shape, rate) of the per-deployment exponential VM-lifetime rate (rate in hours)."""

    shape: float
    rate_hours: float
    record: str

    @property
    def median_lifetime_hours(self) -> float:
        """Median of the Lomax lifetime, hours."""
        return float(self.rate_hours * (2.0 ** (1.0 / self.shape) - 1.0))


def lifetime_prior_from_params(doc: ParamsDocument, record: str) -> LifetimePrior:
    """The prior named ``record`` (``core_lifetime_rate_prior[_marginal]``) of the params document."""
    r = doc.record(TRACE, PRIORS_STAGE, record)
    if r.distribution != "gamma" or not {"shape", "rate"} <= set(r.parameters):
        raise TracelabError(
            f"params record {TRACE}/{PRIORS_STAGE}/{record} is not a Gamma prior "
            f"({r.distribution}); re-run `tracelab priors` and `tracelab export`"
        )
    shape = doc.number(TRACE, PRIORS_STAGE, record, "shape")
    rate = doc.number(TRACE, PRIORS_STAGE, record, "rate")
    return LifetimePrior(shape=shape, rate_hours=rate, record=record)


def expected_remaining_hours(
    shape: FloatArray | float,
    rate_hours: FloatArray | float,
    age_hours: FloatArray | float,
    horizon_hours: float,
) -> FloatArray:
    """E[min(T - u, H) | T > u] of a Lomax(shape k, scale beta) lifetime at age u, hours.

    ``horizon_hours = inf`` gives the unrestricted (beta + u) / (k - 1), infinite for k <= 1.
    """
    k = np.asarray(shape, dtype=np.float64)
    b = np.asarray(rate_hours, dtype=np.float64) + np.asarray(age_hours, dtype=np.float64)
    km1 = k - 1.0
    if not np.isfinite(horizon_hours):
        with np.errstate(divide="ignore"):
            out = np.where(km1 > 0, b / np.where(km1 > 0, km1, 1.0), np.inf)
        return np.asarray(out, dtype=np.float64)
    ratio = b / (b + horizon_hours)
    # near k = 1 the general form is 0/0: its limit b * ln(1 + H/b) is -b * ln(ratio)
    near_one = np.abs(km1) < 1e-9
    safe = np.where(near_one, 1.0, km1)
    general = b / safe * -np.expm1(safe * np.log(ratio))
    return np.asarray(np.where(near_one, -b * np.log(ratio), general), dtype=np.float64)


def lomax_sample_hours(
    prior: LifetimePrior, n: int, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """(rates 1/hour, lifetimes hours) of ``n`` VMs from the mixture, each its own deployment."""
    lam = rng.gamma(prior.shape, 1.0 / prior.rate_hours, n)
    return lam, rng.exponential(1.0, n) / lam


def history(
    key: IntArray, created_s: IntArray, deleted_s: IntArray
) -> tuple[FloatArray, FloatArray]:
    """Per VM, (deaths, exposure hours) of the VMs with its ``key`` created strictly before it:
    deaths at or before its creation, exposure up to it.

    Exposure of the earlier VMs at time t is sum(t - created_j) - sum over dead j of
    (t - deleted_j), so two sorted prefix sums per key give every VM's history at once.
    """
    n = len(created_s)
    if n == 0:
        empty = np.zeros(0, dtype=np.float64)
        return empty, empty
    k = np.asarray(key, dtype=np.int64)
    t = np.asarray(created_s, dtype=np.int64)
    # one sorted key per (key, time): keys never mix in a search
    key_shift = np.int64(1) << np.int64(34)
    query = k * key_shift + t
    born_key = np.sort(query)
    born_time = born_key - (born_key // key_shift) * key_shift
    died_order = np.argsort(k * key_shift + deleted_s, kind="stable")
    died_key = (k * key_shift + deleted_s)[died_order]
    died_time = np.asarray(deleted_s, dtype=np.int64)[died_order]
    start = k * key_shift

    def counts_and_sums(keys: IntArray, times: IntArray, side: str) -> tuple[IntArray, FloatArray]:
        csum = np.concatenate([[0.0], np.cumsum(times, dtype=np.float64)])
        hi = np.searchsorted(keys, query, side=side)  # type: ignore[call-overload]
        lo = np.searchsorted(keys, start, side="left")
        return hi - lo, csum[hi] - csum[lo]

    n_born, sum_born = counts_and_sums(born_key, born_time, "left")
    n_died, sum_died = counts_and_sums(died_key, died_time, "right")
    tf = t.astype(np.float64)
    exposure_h = ((n_born * tf - sum_born) - (n_died * tf - sum_died)) / HOUR_S
    return n_died.astype(np.float64), np.maximum(exposure_h, 0.0)


def deployment_posteriors(
    prior: LifetimePrior,
    deployment: IntArray,
    created_s: IntArray,
    deleted_s: IntArray,
) -> tuple[FloatArray, FloatArray]:
    """Per VM, the Gamma(shape, rate hours) of its deployment's rate given what the deployment
    showed before the VM was created (conjugate update of the prior with :func:`history`)."""
    deaths, exposure_h = history(deployment, created_s, deleted_s)
    return prior.shape + deaths, prior.rate_hours + exposure_h


def _shrunk_rate(
    deaths: FloatArray, exposure_h: FloatArray, parent: FloatArray, pseudo: float
) -> FloatArray:
    """A pooled death rate shrunk to ``parent`` by ``pseudo`` deaths observed at that rate."""
    return np.asarray((deaths + pseudo) / (exposure_h + pseudo / parent), dtype=np.float64)


def feature_posteriors(
    prior: LifetimePrior,
    deployment: IntArray,
    subscription: IntArray,
    group: IntArray,
    created_s: IntArray,
    deleted_s: IntArray,
    pseudo_deaths: float = 2.0,
) -> tuple[FloatArray, FloatArray]:
    """Per VM, Gamma(shape, rate hours) of its deployment's lifetime rate from its features.

    Hierarchy (every level reads only VMs created before the VM, so nothing is learned from the
    future): the pooled death rate of the VM's group (category x shape) relative to the pooled
    rate of all VMs scales the prior; the pooled rate of the subscription's *other* deployments
    relative to the group scales it again; the deployment's own history is then the conjugate
    update. A pooled rate d / E is exposure-weighted, so each level enters as a ratio of pooled
    rates, shrunk to its parent by ``pseudo_deaths``. The prior's shape is kept: features move
    the scale of the lifetime, not how dispersed deployments are.
    """
    n = len(created_s)
    zeros = np.zeros(n, np.int64)
    d_all, e_all = history(zeros, created_s, deleted_s)
    d_grp, e_grp = history(group, created_s, deleted_s)
    d_sub, e_sub = history(subscription, created_s, deleted_s)
    d_dep, e_dep = history(deployment, created_s, deleted_s)
    prior_rate = np.full(n, prior.shape / prior.rate_hours)
    r_all = _shrunk_rate(d_all, e_all, prior_rate, pseudo_deaths)
    r_grp = _shrunk_rate(d_grp, e_grp, r_all, pseudo_deaths)
    # the subscription's other deployments: its history without the VM's own deployment's
    r_sub = _shrunk_rate(d_sub - d_dep, np.maximum(e_sub - e_dep, 0.0), r_grp, pseudo_deaths)
    # group over all, then subscription over group: the product is r_sub / r_all
    return prior.shape + d_dep, prior.rate_hours * r_all / r_sub + e_dep


def lomax_survival(shape: FloatArray, rate_hours: FloatArray, t_hours: float) -> FloatArray:
    """P(T > t) of the Lomax(shape, scale) lifetime of a Gamma(shape, rate) exponential rate."""
    b = np.asarray(rate_hours, dtype=np.float64)
    return np.asarray((b / (b + t_hours)) ** np.asarray(shape, dtype=np.float64))


def lomax_median(shape: FloatArray, rate_hours: FloatArray) -> FloatArray:
    """Median lifetime, hours: S(m) = 1/2 gives m = scale * (2 ** (1 / shape) - 1)."""
    k = np.asarray(shape, dtype=np.float64)
    return np.asarray(np.asarray(rate_hours, dtype=np.float64) * np.expm1(np.log(2.0) / k))


def predicted_classes(shape: FloatArray, rate_hours: FloatArray) -> npt.NDArray[np.int8]:
    """LAVA class 1..4 of highest predictive probability (the classifier that maximises
    expected accuracy; the mean of a heavy-tailed lifetime lands in a long class for almost
    every VM, however likely a short life is)."""
    edges = (0.0, *LAVA_CLASS_UPPER_HOURS[:-1])
    surv = np.stack([lomax_survival(shape, rate_hours, e) for e in edges] + [np.zeros(len(shape))])
    prob = surv[:-1] - surv[1:]
    return np.asarray(np.argmax(prob, axis=0) + 1, dtype=np.int8)


def predicted_long(shape: FloatArray, rate_hours: FloatArray) -> npt.NDArray[np.bool_]:
    """LA-Binary's class: long when living past the 2 h cutoff is at least as likely as not."""
    return np.asarray(lomax_survival(shape, rate_hours, LA_BINARY_CUTOFF_HOURS) >= 0.5)


def true_classes(
    lifetime_hours: FloatArray, censored: npt.NDArray[np.bool_]
) -> npt.NDArray[np.int8]:
    """LAVA class of each VM's true lifetime; 0 where censoring leaves it unknown (a VM still
    alive at the end is known to be LC4 only once it has lived 100 h)."""
    cls = lava_classes(np.asarray(lifetime_hours, dtype=np.float64))
    known = ~censored | (cls == len(LAVA_CLASS_UPPER_HOURS))
    return np.where(known, cls, 0).astype(np.int8)


def lava_classes(lifetime_hours: FloatArray) -> npt.NDArray[np.int8]:
    """LAVA lifetime class 1..4 of a predicted lifetime (LAVA paper §4.3); >= 1000 h stays LC4."""
    edges = np.asarray(LAVA_CLASS_UPPER_HOURS[:-1])
    return (np.searchsorted(edges, lifetime_hours, side="right") + 1).astype(np.int8)


def las_temporal_cost(delta_hours: FloatArray) -> npt.NDArray[np.int64]:
    """Index of the LAS bucket of ΔT (LAVA paper §4.2: ΔT = 70 min is cost 2)."""
    bounds = np.asarray(LAS_BUCKETS_HOURS)
    idx = np.searchsorted(bounds, np.maximum(delta_hours, 0.0), side="right") - 1
    return np.asarray(idx, dtype=np.int64)
