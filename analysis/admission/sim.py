"""One cluster of C cores over a horizon: event-driven simulation with an admission policy.

Cluster Admission §2.1: deployments arrive as a Poisson process; each core dies at rate lambda, scale-outs
come at rate r while the deployment lives, a deployment dies at zero cores or at its maximal
lifetime; a scale-out that would exceed C fails and is logged. Time is continuous: a heap holds
each live deployment's next event (competing exponentials, redrawn after each of its events).

Randomness: the arrival times, true parameters, initial sizes, maximal lifetimes and prior
pseudo-observations come from a numpy Generator seeded by (seed, stream, run); each deployment's
behaviour from its own counter-based stream. Deployment i therefore behaves the same under every
policy and threshold until a failed scale-out changes its size (common random numbers).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tracelab.analysis.admission.importance import (
    ImportanceSampling,
    badness_measure,
    bucket_of,
    redraw_until_kept,
)
from tracelab.analysis.admission.model import (
    AdmissionPriors,
    Belief,
    counter_stream,
    counter_uniforms,
    mean_lambda_power,
)
from tracelab.analysis.admission.moments import ClusterMoments

POLICIES = ("zeroth", "first", "second", "first-marginal", "second-marginal", "accept-all")


@dataclass(frozen=True)
class ClusterConfig:
    """Everything one run needs besides its seed (picklable, so a Dask worker can take it)."""

    priors: AdmissionPriors
    cores: int
    horizon_hours: float
    policy: str
    #: zeroth/first: fraction of C; second: bound on the overflow probability
    threshold: float
    observations: int = 0
    lookahead_hours: tuple[float, ...] = (26280.0, 8760.0, 730.0, 168.0, 24.0)
    lookahead_steps: int = 600
    marginal_cores: float = 1.0
    #: recompute every deployment's moments at each arrival instead of incrementally (benchmark)
    naive_moments: bool = False
    #: App. D: redraw runs by badness bucket (None: plain Monte Carlo)
    importance: ImportanceSampling | None = None


@dataclass(frozen=True)
class RunResult:
    """What one run measured; ``utilization`` = time-mean active cores / C."""

    run: int
    utilization: float
    scaleouts: int
    failures: int
    arrivals: int
    accepted: int
    core_deaths: int
    shutdowns: int
    zero_core_deaths: int
    #: time-mean number of live deployments (the pooling the moment policies exploit)
    mean_deployments: float = 0.0
    #: importance weight P(B)/Q(B) of the run's badness bucket (App. D); 1 without it
    weight: float = 1.0
    bucket: int = 0
    #: the run's badness measure (App. D, Def. D.1); None without importance sampling
    badness: float | None = None
    #: arrivals that fit the cluster now (and, for the first moment, under T·C now) but that a
    #: look-ahead step of a moment policy rejected: where it decided otherwise than the zeroth
    lookahead_rejections: int = 0


class _Deployment:
    __slots__ = (
        "belief",
        "cores",
        "death_at",
        "lam",
        "rate",
        "size",
        "uniform",
        "version",
    )

    def __init__(
        self,
        lam: float,
        rate: float,
        size: float,
        death_at: float,
        uniform: Callable[[], float],
        belief: Belief,
    ) -> None:
        self.lam = lam
        self.rate = rate
        self.size = size
        self.death_at = death_at
        #: the deployment's own uniforms, counter_uniform(key, 1), (key, 2), ... (_Uniforms)
        self.uniform = uniform
        self.belief = belief
        self.cores = 0
        self.version = 0

    def snapshot(self) -> tuple[float, ...]:
        """The belief snapshot at the deployment's last event (what the moment sums use)."""
        return self.belief.snapshot(self.cores)


#: arrivals whose first uniforms are drawn in one numpy call, and how many each
_UNIFORM_CHUNK = 256
_FIRST_UNIFORMS = 64


class _Uniforms:
    """Each deployment's stream ``counter_uniform(key, 1), (key, 2), ...``: the first values of
    ``_UNIFORM_CHUNK`` consecutive arrivals at once (arrivals are accepted in order, so one chunk
    is kept), the rest in blocks (:func:`counter_stream`). The values depend only on the key and
    the counter, as with one scalar call per value."""

    def __init__(self, keys: np.ndarray) -> None:
        self.keys = keys
        self.chunk = -1
        self.rows: np.ndarray = np.zeros((0, _FIRST_UNIFORMS))

    def stream(self, i: int) -> Callable[[], float]:
        chunk, row = divmod(i, _UNIFORM_CHUNK)
        if chunk != self.chunk:
            keys = self.keys[chunk * _UNIFORM_CHUNK : (chunk + 1) * _UNIFORM_CHUNK]
            self.rows = counter_uniforms(keys, 1, _FIRST_UNIFORMS)
            self.chunk = chunk
        head: list[float] = self.rows[row].tolist()
        rest = counter_stream(int(self.keys[i]), _FIRST_UNIFORMS + 1)
        return itertools.chain(head, rest).__next__


def _poisson(mean: float, u: float) -> int:
    """Poisson(mean) by inversion of one uniform (means here are a few cores)."""
    k = 0
    p = math.exp(-mean)
    cdf = p
    while u > cdf and p > 0.0:
        k += 1
        p *= mean / k
        cdf += p
    return k


@dataclass(frozen=True)
class _Arrivals:
    times: np.ndarray
    lam: np.ndarray
    rate: np.ndarray
    size: np.ndarray
    cores: np.ndarray
    max_life: np.ndarray
    keys: np.ndarray
    #: pseudo-observations (seed §6): lifetime hours, scale-out gap hours, extra cores
    obs_life: np.ndarray
    obs_gap: np.ndarray
    obs_extra: np.ndarray


def _draw_arrivals(cfg: ClusterConfig, seed: tuple[int, ...]) -> _Arrivals:
    p = cfg.priors
    rng = np.random.default_rng(np.random.SeedSequence(list(seed)))
    count = int(rng.poisson(p.arrival_rate_per_hour * cfg.horizon_hours))
    times = np.sort(rng.uniform(0.0, cfg.horizon_hours, count))
    lam = rng.gamma(p.lifetime_shape, 1.0 / p.lifetime_rate, count)
    rho = rng.gamma(p.scaleout_shape, 1.0 / p.scaleout_rate, count)
    size = rng.gamma(p.size_shape, 1.0 / p.size_rate, count)
    cores = 1 + rng.poisson(size)
    max_life = rng.exponential(1.0, count) / (p.shutdown_per_lifetime * lam)
    keys = rng.integers(0, 2**63 - 1, count, dtype=np.int64)
    # drawn whatever cfg.observations is, so every configuration sees the same arrivals
    unit_life = rng.standard_gamma(max(cfg.observations, 1), count)
    unit_gap = rng.standard_gamma(max(cfg.observations, 1), count)
    extra = rng.poisson(size * cfg.observations)
    rate = rho * lam**p.alpha
    return _Arrivals(
        times, lam, rate, size, cores, max_life, keys, unit_life / lam, unit_gap / rate, extra
    )


def _initial_belief(cfg: ClusterConfig, arr: _Arrivals, i: int, now: float) -> Belief:
    b = Belief(cfg.priors, now)
    b.observe_size(int(arr.cores[i]))
    k = cfg.observations
    if k:
        # k pseudo-observations of each process (seed §6): core lifetimes, scale-out gaps, sizes
        b.a_lam += k
        b.b_lam += float(arr.obs_life[i])
        b.a_rho += k
        b.b_rho += float(arr.obs_gap[i]) * mean_lambda_power(b.a_lam, b.b_lam, cfg.priors.alpha)
        b.a_s += float(arr.obs_extra[i])
        b.b_s += k
    return b


def run_badness(cfg: ClusterConfig, arr: _Arrivals) -> float:
    """The badness measure (App. D, Def. D.1) of a run's pre-drawn deployments."""
    return badness_measure(
        arr.times,
        arr.cores,
        arr.lam,
        arr.rate,
        arr.size,
        arr.max_life,
        cfg.cores,
        cfg.horizon_hours,
    )


def pilot_badness(cfg: ClusterConfig, seed: tuple[int, ...]) -> float:
    """BM of the nominal run ``seed`` (the pilot that estimates the bucket probabilities)."""
    return run_badness(cfg, _draw_arrivals(cfg, seed))


def sample_run(
    cfg: ClusterConfig, seed: tuple[int, ...]
) -> tuple[_Arrivals, int, float, float | None]:
    """The run's deployments, bucket, weight and BM: the nominal draw, or App. D's redraw scheme.

    Candidate ``a`` is seeded by ``(*seed, a)`` (the first by ``seed`` itself, so a run kept at
    once is the nominal one) and the redraw coins by ``(*seed, 0, 1)``: the choice depends only on
    (seed, stream, run) and the scheme, never on the policy or threshold (common random numbers).
    """
    imp = cfg.importance
    if imp is None:
        return _draw_arrivals(cfg, seed), 0, 1.0, None
    coins = np.random.default_rng(np.random.SeedSequence([*seed, 0, 1]))
    # the kept candidate is the last one scored
    last = [math.nan]

    def bucket(arr: _Arrivals) -> int:
        last[0] = run_badness(cfg, arr)
        return bucket_of(last[0], imp.thresholds)

    arr, b = redraw_until_kept(
        lambda a: _draw_arrivals(cfg, seed if a == 0 else (*seed, a)),
        bucket,
        coins.random,
        imp.redraw,
    )
    return arr, b, imp.weights[b], last[0]


class _Cluster:
    """Mutable state of one run: the heap, the deployments, counters and the moment sums."""

    def __init__(self, cfg: ClusterConfig, arr: _Arrivals) -> None:
        self.cfg = cfg
        self.arr = arr
        self.initial_cores: list[int] = arr.cores.tolist()
        self.prior_snapshots: dict[int, tuple[float, ...]] = {}
        self.heap: list[tuple[float, int, int, int]] = []
        self.deps: dict[int, _Deployment] = {}
        self.active = 0
        self.area = 0.0
        self.deployment_area = 0.0
        self.t = 0.0
        self.counts = dict.fromkeys(
            ("scaleouts", "failures", "accepted", "core_deaths", "shutdowns", "zero", "lookahead"),
            0,
        )
        uses_moments = cfg.policy in ("first", "second", "first-marginal", "second-marginal")
        self.moments = (
            ClusterMoments(
                cfg.lookahead_hours,
                cfg.lookahead_steps,
                cfg.priors.shutdown_per_lifetime,
                cfg.priors.alpha,
                naive=cfg.naive_moments,
            )
            if uses_moments
            else None
        )

    def advance_to(self, t: float) -> None:
        self.area += self.active * (t - self.t)
        self.deployment_area += len(self.deps) * (t - self.t)
        self.t = t

    def schedule(self, i: int, d: _Deployment) -> None:
        total = d.cores * d.lam + d.rate
        wait = -math.log(d.uniform()) / total if total > 0 else math.inf
        when = min(self.t + wait, d.death_at)
        if when < self.cfg.horizon_hours:
            d.version += 1
            heapq.heappush(self.heap, (when, i, d.version, 0))

    def accept(self, i: int, d: _Deployment) -> None:
        d.cores = self.initial_cores[i]
        self.active += d.cores
        self.deps[i] = d
        self.counts["accepted"] += 1
        self.schedule(i, d)

    def arrival_snapshot(self, i: int, n: int) -> tuple[float, ...]:
        """The belief snapshot of arriving deployment ``i`` (``n`` cores) before any object is
        built for it (most arrivals are rejected): without prior observations it depends on
        ``n`` and the time only."""
        if self.cfg.observations:
            return _initial_belief(self.cfg, self.arr, i, self.t).snapshot(n)
        snap = self.prior_snapshots.get(n)
        if snap is None:
            snap = self.prior_snapshots[n] = _initial_belief(self.cfg, self.arr, i, 0.0).snapshot(n)
        return (*snap[:-1], self.t)

    def decide(self, i: int) -> bool:
        cfg = self.cfg
        n = self.initial_cores[i]
        if self.active + n > cfg.cores:
            return False  # its initial cores do not fit: no policy can place it here
        if cfg.policy == "accept-all":
            return True
        if cfg.policy == "zeroth":
            return self.active + n < cfg.threshold * cfg.cores
        if cfg.policy.startswith("first") and self.active + n >= cfg.threshold * cfg.cores:
            # look-ahead step 0: the size now is known exactly, no moments needed to reject
            return False
        assert self.moments is not None
        admitted = self.moments.admits(
            self.arrival_snapshot(i, n),
            self.t,
            cfg.policy,
            cfg.threshold,
            cfg.cores,
            cfg.marginal_cores,
        )
        self.counts["lookahead"] += not admitted
        return admitted

    def handle_event(self, i: int) -> None:
        d = self.deps[i]
        cfg = self.cfg
        p = cfg.priors
        d.belief.elapse(self.t, d.cores, p.shutdown_per_lifetime, p.alpha)
        if self.t >= d.death_at:
            self.counts["shutdowns"] += 1
            self._remove(i, d)
            return
        if d.uniform() * (d.cores * d.lam + d.rate) < d.cores * d.lam:
            d.cores -= 1
            self.active -= 1
            d.belief.a_lam += 1.0
            self.counts["core_deaths"] += 1
            if d.cores == 0:
                self.counts["zero"] += 1
                self._remove(i, d)
                return
        else:
            extra = 1 + _poisson(d.size, d.uniform())
            d.belief.observe_scaleout(extra)
            self.counts["scaleouts"] += 1
            if self.active + extra > cfg.cores:
                self.counts["failures"] += 1
            else:
                d.cores += extra
                self.active += extra
        if self.moments is not None:
            self.moments.changed(i, d)
        self.schedule(i, d)

    def _remove(self, i: int, d: _Deployment) -> None:
        self.active -= d.cores
        d.cores = 0
        del self.deps[i]
        if self.moments is not None:
            self.moments.changed(i, None)


def simulate_cluster(cfg: ClusterConfig, seed: tuple[int, ...], run: int) -> RunResult:
    """One run of the cluster under ``cfg.policy`` (seed = (base seed, stream, run))."""
    arr, bucket, weight, bm = sample_run(cfg, seed)
    c = _Cluster(cfg, arr)
    uniforms = _Uniforms(arr.keys)
    # the arrival times as Python floats, with a sentinel after the last
    times = [*arr.times.tolist(), math.inf]
    n_arr = len(arr.times)
    next_arrival = 0
    horizon = cfg.horizon_hours
    while True:
        t_arr = times[next_arrival]
        if c.heap and c.heap[0][0] <= t_arr:
            when, i, version, _ = heapq.heappop(c.heap)
            d = c.deps.get(i)
            if d is None or d.version != version:
                continue
            c.advance_to(when)
            c.handle_event(i)
            continue
        if t_arr >= horizon:
            break
        c.advance_to(t_arr)
        i = next_arrival
        next_arrival += 1
        if c.decide(i):
            d = _Deployment(
                float(arr.lam[i]),
                float(arr.rate[i]),
                float(arr.size[i]),
                t_arr + float(arr.max_life[i]),
                uniforms.stream(i),
                _initial_belief(cfg, arr, i, t_arr),
            )
            c.accept(i, d)
            if c.moments is not None:
                c.moments.changed(i, d)
    c.advance_to(horizon)
    k = c.counts
    return RunResult(
        run=run,
        utilization=c.area / (horizon * cfg.cores),
        scaleouts=k["scaleouts"],
        failures=k["failures"],
        arrivals=n_arr,
        accepted=k["accepted"],
        core_deaths=k["core_deaths"],
        shutdowns=k["shutdowns"],
        zero_core_deaths=k["zero"],
        mean_deployments=c.deployment_area / horizon,
        weight=weight,
        bucket=bucket,
        badness=bm,
        lookahead_rejections=k["lookahead"],
    )
