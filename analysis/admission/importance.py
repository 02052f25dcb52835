"""Importance sampling of bad runs (Cluster Admission App. D): badness measure, buckets, redraw weights.

Before a run starts, its deployments (arrival times, true parameters, initial sizes, maximal
lifetimes) are pre-drawn. Def. D.1 scores them with an extremely simplified monthly simulation, the
badness measure BM; BM thresholds sort runs into buckets. A run in a lower bucket is redrawn with
probability ``redraw[i]`` and every bucket below it is then blocked (redraws landing there are
rejected automatically); the top bucket is never redrawn. Runs therefore come from an importance
distribution q that favours bad runs; within a bucket q is the nominal distribution conditioned on
the bucket, so a run of bucket i carries the weight ``P(B_i) / Q(B_i)`` (Prop. D.2), with the
nominal bucket probabilities P(B_i) estimated from a pilot of BM values, as the paper does.

Constants the seed's copy does not show (its numerals are stripped) are ours: months of 730 hours,
the deployments of the run's own arrival process (the paper: 730 per month, its arrival rate),
a one-sided 95% Cantelli upper bound, BM = the largest monthly load / C (``docs/admission.md``).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import numpy as np

from tracelab.analysis.admission.model import FloatArray
from tracelab.analysis.common.errors import TracelabError

MONTH_HOURS = 730.0
#: Cantelli: P(N >= mean + k sd) <= 1 / (1 + k^2) = 5% for k = sqrt(19)
CANTELLI_K = math.sqrt(19.0)


def upper_size(
    cores: FloatArray, lam: FloatArray, rate: FloatArray, size: FloatArray, age: FloatArray
) -> FloatArray:
    """Cantelli 95% upper bound of each deployment's size ``age`` hours after it arrived, its true
    parameters known and without shutdown (Def. D.1 (2)-(3)): initial cores survive with
    ``q = exp(-lam age)`` (Binomial), scale-outs add a compound Poisson sum (``docs/admission.md``)."""
    q = np.exp(-lam * age)
    mean = cores * q + rate * (1.0 + size) * (1.0 - q) / lam
    var = cores * q * (1.0 - q) + rate * (
        (1.0 + size) * (1.0 - q) / lam + (size * size + 2.0 * size) * (1.0 - q * q) / (2.0 * lam)
    )
    out: FloatArray = mean + CANTELLI_K * np.sqrt(np.maximum(var, 0.0))
    return out


def _admit(sizes: list[int], room: float) -> list[int]:
    """Def. D.1 (5): the month's arrivals in order, each admitted if its cores fit in ``room``."""
    out: list[int] = []
    for i, n in enumerate(sizes):
        if room < 1.0:
            break  # every deployment has at least one core
        if n <= room:
            out.append(i)
            room -= n
    return out


def badness_measure(
    times: FloatArray,
    cores: FloatArray,
    lam: FloatArray,
    rate: FloatArray,
    size: FloatArray,
    max_life: FloatArray,
    capacity: float,
    horizon_hours: float,
) -> float:
    """BM of a run's pre-drawn deployments (Def. D.1): the largest load / C at a month's start.

    Deployments arriving in a month all arrive at its start, in their order, and are admitted when
    their initial cores fit under C minus the load; the load at a month's start is the sum of the
    admitted deployments' upper size bounds (:func:`upper_size`, at their age then); a deployment
    leaves at the end of the month in which its maximal lifetime ends, never at zero cores.
    """
    months = max(math.ceil(horizon_hours / MONTH_HOURS), 1)
    month_of = np.floor(times / MONTH_HOURS).astype(np.int64)
    starts = np.searchsorted(month_of, np.arange(months + 1))
    sizes = cores.astype(np.int64).tolist()
    live = np.zeros(0, dtype=np.int64)
    since = np.zeros(0, dtype=np.float64)
    worst = 0.0
    for m in range(months):
        # the month in which each live deployment's maximal lifetime ends
        ends = np.floor((since * MONTH_HOURS + max_life[live]) / MONTH_HOURS)
        live, since = live[ends >= m], since[ends >= m]
        age = (m - since) * MONTH_HOURS
        load = float(upper_size(cores[live], lam[live], rate[live], size[live], age).sum())
        worst = max(worst, load / capacity)
        lo, hi = int(starts[m]), int(starts[m + 1])
        new = np.asarray(_admit(sizes[lo:hi], capacity - load), dtype=np.int64) + lo
        live = np.concatenate([live, new])
        since = np.concatenate([since, np.full(new.size, float(m))])
    return worst


def bucket_of(bm: float, thresholds: tuple[float, ...]) -> int:
    """Bucket index: 0 below ``thresholds[0]``, ..., ``len(thresholds)`` at or above the last."""
    return bisect.bisect_right(thresholds, bm)


def sampling_probabilities(
    nominal: tuple[float, ...], redraw: tuple[float, ...]
) -> tuple[float, ...]:
    """Q(B_i) of the redraw scheme (Prop. D.2) from the nominal P(B_i) and redraw probabilities.

    With floor L (buckets below L blocked), a draw lands in bucket j >= L with probability
    P_j / P_{>=L}; it is kept with probability 1 - redraw[j], else redrawn with floor j. So the
    end-bucket distribution A_L from floor L solves
    ``A_L(i) (1 - P'_L r_L) = P'_i (1 - r_i) [i >= L] + sum_{j > L} P'_j r_j A_j(i)``
    (P' = P / P_{>=L}; the j = L term is the geometric series of the proof), solved from the top
    floor down; Q = A_0.
    """
    k = len(nominal)
    ends = [[0.0] * k for _ in range(k)]
    for floor in range(k - 1, -1, -1):
        total = sum(nominal[floor:])
        if total <= 0.0:
            ends[floor][floor] = 1.0  # unreachable floor: nothing can be drawn there
            continue
        share = [p / total for p in nominal]
        stay = 1.0 - share[floor] * redraw[floor]
        for i in range(floor, k):
            acc = share[i] * (1.0 - redraw[i])
            acc += sum(share[j] * redraw[j] * ends[j][i] for j in range(floor + 1, k))
            ends[floor][i] = acc / stay
    return tuple(ends[0])


T = TypeVar("T")


def redraw_until_kept(
    draw: Callable[[int], T],
    bucket: Callable[[T], int],
    coin: Callable[[], float],
    redraw: tuple[float, ...],
    max_attempts: int = 100_000,
) -> tuple[T, int]:
    """App. D's rejection scheme: candidate ``draw(a)`` for a = 0, 1, ...; a candidate below the
    floor is rejected, else redrawn with probability ``redraw[its bucket]`` (``coin()`` uniform on
    [0, 1)), raising the floor to its bucket; the first candidate kept is returned with its bucket.
    """
    floor = 0
    for attempt in range(max_attempts):
        x = draw(attempt)
        b = bucket(x)
        if b < floor:
            continue  # blocked after an earlier redraw from a higher bucket
        if coin() < redraw[b]:
            floor = b
            continue
        return x, b
    raise TracelabError(f"no run kept after {max_attempts} redraws: lower the --is-redraw values")


@dataclass(frozen=True)
class ImportanceSampling:
    """The scheme a run uses (picklable): buckets, redraw probabilities and the Prop. D.2 weights."""

    #: BM bucket bounds, ascending (bucket i: thresholds[i-1] <= BM < thresholds[i])
    thresholds: tuple[float, ...]
    #: redraw probability per bucket (the top one is 0: never redrawn)
    redraw: tuple[float, ...]
    #: nominal P(B_i), estimated from the pilot
    nominal: tuple[float, ...]
    #: Q(B_i) under the redraw scheme (Prop. D.2)
    sampling: tuple[float, ...]
    #: P(B_i) / Q(B_i): the weight of a run of bucket i
    weights: tuple[float, ...]
    pilot_runs: int

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cantelli_k": CANTELLI_K, "month_hours": MONTH_HOURS}


def importance_scheme(
    pilot_bm: FloatArray, quantiles: tuple[float, ...], redraw: tuple[float, ...]
) -> ImportanceSampling:
    """Bucket bounds at the pilot's BM quantiles, P(B_i) = the pilot's share per bucket."""
    thresholds = tuple(float(x) for x in np.quantile(pilot_bm, sorted(quantiles)))
    counts = np.bincount(
        [bucket_of(float(b), thresholds) for b in pilot_bm], minlength=len(thresholds) + 1
    )
    nominal = tuple(float(c) / len(pilot_bm) for c in counts)
    full = (*redraw, 0.0)
    sampling = sampling_probabilities(nominal, full)
    weights = tuple(p / q if q > 0 else 0.0 for p, q in zip(nominal, sampling, strict=True))
    return ImportanceSampling(thresholds, full, nominal, sampling, weights, len(pilot_bm))
