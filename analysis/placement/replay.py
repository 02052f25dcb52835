"""Event replay of one VM stream on one pool of identical hosts under one placement policy.

Hosts' free cores and memory live in numpy arrays; every placement scores all hosts at once with
a lexicographic key folded into one float (higher levels times a factor larger than any lower
level's range). Events are pre-sorted by (time, deletions first, VM), so capacity freed at a
300 s tick is usable by the VMs created at the same tick.

Policies (LAVA paper):

* ``best-fit``: the fullest feasible host, fullness = free cores / host cores + free memory /
  host memory (the VM's own share is the same on every host, so it drops out);
* ``la-binary`` (§2.4, §5.3): VM short/long by its one-shot prediction against 2 h; host class =
  long if its longest one-shot predicted remaining time is >= 2 h; same-class non-empty hosts
  first, then other non-empty hosts, then empty hosts; Best Fit within a level;
* ``las`` (§4.2): temporal cost = bucket of ΔT = max(VM exit - host exit, 0), host exit = the
  latest repredicted exit of its VMs (now for an empty host), one level above Best Fit;
* ``lava`` (§4.3): host states empty/open/recycling with a lifetime class and a deadline; levels
  (recycling hosts of a higher class, closer first) < (open hosts of the VM's class) < (any
  other non-empty host) < (empty), then LAS, then Best Fit; with ``lava_strict`` a recycling
  host of the VM's class or lower ranks below the empty hosts instead ("only VMs at least one
  class lower", taken only when nothing else fits). Open -> recycling above ``lava_fill`` of cores or
  memory (the VMs then present are residual); when every residual VM has left the class drops by
  one and the remaining VMs become residual; a host past its deadline (``deadline_factor`` times
  its class's upper bound after the last class change) rises one class, turns recycling and all
  its VMs become residual (our reading of Fig. 5(c)).

Metrics (§2.3): empty hosts as a time-averaged % of the pool over [warm-up, last creation];
stranded CPU and memory from periodic inflation (the pool's VM mix placed on every host until
no shape fits anywhere); hosts used (mean, peak); LARS migrations on defragmentation sets taken
from the Best Fit replay (§4.4, §6.3).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from tracelab.analysis.placement.model import (
    HOUR_S,
    LA_BINARY_CUTOFF_HOURS,
    LAS_BUCKETS_HOURS,
    LAVA_CLASS_UPPER_HOURS,
    expected_remaining_hours,
    lava_classes,
    lomax_median,
    predicted_classes,
    predicted_long,
)
from tracelab.analysis.placement.stream import VmStream

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

EMPTY, OPEN, RECYCLING = 0, 1, 2
#: LAVA levels (lower first): recycling hosts of a higher class take 0..2 (closest first)
LAVA_OPEN_SAME, LAVA_OTHER_NON_EMPTY, LAVA_EMPTY, LAVA_LAST_RESORT = 3, 4, 5, 6
STATE_NAMES = ("empty", "open", "recycling")
# the first boundary as -inf: a negative ΔT is clipped to 0 by the search itself
_LAS_BOUNDS_S = np.asarray((-np.inf, *LAS_BUCKETS_HOURS[1:])) * HOUR_S
_CLASS_UPPER_S = np.asarray((0.0, *LAVA_CLASS_UPPER_HOURS)) * HOUR_S


@dataclass(frozen=True)
class ReplayConfig:
    """Everything one replay needs besides its stream (times in seconds)."""

    policy: str
    predictor: str
    hosts: int
    host_cores: float
    host_memory_gb: float
    horizon_hours: float
    warmup_s: int
    inflation_every_s: int
    inflation_draws: int
    defrag_every_s: int
    defrag_hosts: int
    migration_slots: int
    migration_s: float
    lava_fill: float
    deadline_factor: float
    seed: int
    #: repredict every host's exit at most this often (300 s: at every tick of the trace grid)
    repredict_every_s: int = 300
    #: LAVA: recycling hosts take a VM of their class or higher only when nothing else fits
    lava_strict: bool = False
    record: bool = False


@dataclass(frozen=True)
class ReplayInput:
    """A replay's work item (picklable: plain arrays and frozen records)."""

    pool: int
    config: ReplayConfig
    stream: VmStream
    #: per VM, the Gamma posterior of its deployment's lifetime rate (shape, rate in hours)
    shape: FloatArray
    rate_hours: FloatArray


@dataclass(frozen=True)
class ReplayResult:
    """Metrics of one replay; ``host_of``/``transitions`` only when ``config.record``."""

    pool: int
    policy: str
    predictor: str
    hosts: int
    vms: int
    events: int
    empty_host_pct: float
    hosts_used_mean: float
    hosts_used_peak: int
    stranded_cpu_pct: float
    stranded_memory_pct: float
    rejected_vms: int
    deadline_misses: int
    class_lowerings: int
    series_hours: FloatArray
    series_empty_pct: FloatArray
    defrag: tuple[tuple[float, int, int, int, int], ...] = ()
    host_of: IntArray | None = None
    transitions: tuple[tuple[float, int, int, int, int, int, str], ...] = field(default=())


def migrations_needed(remaining_s: FloatArray, slots: int, duration_s: float) -> int:
    """Migrations done when VMs are taken in the given order, ``slots`` at a time (LAVA paper §5.1).

    A VM whose remaining lifetime ends before its turn comes has exited and needs no migration.
    """
    free_at = [0.0] * slots
    done = 0
    for r in remaining_s:
        start = free_at[0]
        if r <= start:
            continue
        heapq.heapreplace(free_at, start + duration_s)
        done += 1
    return done


def inflation_stranding(
    free_cores: FloatArray,
    free_memory: FloatArray,
    shapes: FloatArray,
    draws: IntArray,
) -> tuple[float, float]:
    """Free (cores, memory) left once the VM mix fills every host (LAVA paper §2.3).

    Every host takes the drawn shapes in order when they fit, then as many of each shape
    (largest first) as still fit, so at the end no shape of the mix fits anywhere.
    """
    fc = free_cores.copy()
    fm = free_memory.copy()
    for i in draws:
        c, m = shapes[i]
        fits = (fc >= c) & (fm >= m)
        fc[fits] -= c
        fm[fits] -= m
    for c, m in shapes[np.argsort(-shapes[:, 0], kind="stable")]:
        k = np.floor(np.minimum(fc / c, fm / m if m > 0 else np.inf))
        fc -= k * c
        fm -= k * m
    return float(fc.sum()), float(fm.sum())


def _event_order(stream: VmStream) -> tuple[IntArray, IntArray, IntArray]:
    n = len(stream)
    times = np.concatenate([stream.deleted_s, stream.created_s])
    kinds = np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64)])
    vms = np.concatenate([np.arange(n), np.arange(n)]).astype(np.int64)
    order = np.lexsort((vms, kinds, times))
    return times[order], kinds[order], vms[order]


class _Replay:
    """Mutable state of one replay; :func:`replay` is its only user."""

    def __init__(self, item: ReplayInput) -> None:
        cfg, s = item.config, item.stream
        self.cfg, self.s, self.pool = cfg, s, item.pool
        self.shape, self.rate_h = item.shape, item.rate_hours
        n, hosts = len(s), cfg.hosts
        self.free_c = np.full(hosts, cfg.host_cores)
        self.free_m = np.full(hosts, cfg.host_memory_gb)
        self.fullness = np.full(hosts, 2.0)
        self.n_vms = np.zeros(hosts, np.int64)
        self.count = [0] * hosts
        self.free_c_l = [cfg.host_cores] * hosts
        self.free_m_l = [cfg.host_memory_gb] * hosts
        self.cores: list[float] = s.cores.tolist()
        self.memory: list[float] = s.memory_gb.tolist()
        max_slots = int(cfg.host_cores // float(s.cores.min())) + 1 if n else 1
        self.slots = np.full((hosts, max_slots), -1, np.int64)
        self.free_slots = [list(range(max_slots - 1, -1, -1)) for _ in range(hosts)]
        self.host_of = np.full(n, -1, np.int64)
        self.slot_of = np.full(n, -1, np.int64)
        self.host_exit = np.full(hosts, -np.inf)
        self.n_empty = hosts
        self._set_predictions(item)
        self.state = np.zeros(hosts, np.int64)
        self.cls = np.zeros(hosts, np.int64)
        self.deadline = np.full(hosts, np.inf)
        self.tiers = np.full((5, hosts), float(LAVA_EMPTY))
        self.next_refresh = -np.inf
        self.residual_left = np.zeros(hosts, np.int64)
        self.residual = np.zeros(n, np.bool_)
        self.misses = self.lowerings = self.rejected = self.peak_used = 0
        self.transitions: list[tuple[float, int, int, int, int, int, str]] = []
        self.t0 = float(s.created_s.min()) + cfg.warmup_s if n else 0.0
        self.t1 = max(float(s.created_s.max()) if n else 0.0, self.t0)
        self.area = 0.0
        self.next_series = self.next_inflation = self.next_defrag = self.t0
        self.series: list[tuple[float, float]] = []
        self.stranded: list[tuple[float, float]] = []
        self.defrag: list[tuple[float, int, int, int, int]] = []
        self.defrag_rng = np.random.default_rng(cfg.seed + 104729 * item.pool)
        shapes, inverse, counts = np.unique(
            np.stack([s.cores, s.memory_gb], axis=1),
            axis=0,
            return_inverse=True,
            return_counts=True,
        )
        self.shapes = shapes
        self.vm_shape: list[int] = np.asarray(inverse).reshape(-1).tolist()
        self.shape_c: list[float] = shapes[:, 0].tolist()
        self.shape_m: list[float] = shapes[:, 1].tolist()
        # per VM shape, every host's Best Fit key, inf where the shape does not fit: a placement
        # then needs no feasibility test of its own, and a host change updates one column
        fits = (shapes[:, :1] <= cfg.host_cores) & (shapes[:, 1:] <= cfg.host_memory_gb)
        self.masked = np.where(fits, np.full((len(shapes), hosts), 2.0), np.inf)
        rng = np.random.default_rng(cfg.seed + 7919 * item.pool)
        self.draws = (
            rng.choice(len(shapes), size=cfg.inflation_draws, p=counts / counts.sum())
            if n
            else np.zeros(0, np.int64)
        )

    def _set_predictions(self, item: ReplayInput) -> None:
        """Exit times (oracle: true; else the mean at creation) and each VM's classes."""
        cfg, s = item.config, item.stream
        at_creation_s = expected_remaining_hours(
            item.shape, item.rate_hours, 0.0, cfg.horizon_hours
        )
        at_creation_s = at_creation_s * HOUR_S
        oracle = cfg.predictor == "oracle"
        self.fixed_exit = s.deleted_s.astype(np.float64) if oracle else s.created_s + at_creation_s
        self.repredict = cfg.predictor == "model" and cfg.policy in ("las", "lava")
        self.uses_exit = cfg.policy != "best-fit"
        if oracle:
            true_s = (s.deleted_s - s.created_s).astype(np.float64)
            self.vm_class = lava_classes(true_s / HOUR_S).astype(np.int64)
            self.vm_long = true_s >= LA_BINARY_CUTOFF_HOURS * HOUR_S
        else:
            # classes are the most probable ones under the prediction (exits stay its mean)
            self.vm_class = predicted_classes(item.shape, item.rate_hours).astype(np.int64)
            self.vm_long = predicted_long(item.shape, item.rate_hours)
        if cfg.policy == "la-binary" and not oracle:
            # LA's host class is its VMs' longest predicted remaining time; the median keeps a
            # VM classed short (median < 2 h) from making its host long
            median_h = np.minimum(lomax_median(item.shape, item.rate_hours), cfg.horizon_hours)
            self.fixed_exit = s.created_s + median_h * HOUR_S

    # -- host bookkeeping ------------------------------------------------------------------
    def _set_state(self, h: int, state: int, cls: int, now: float, cause: str) -> None:
        if self.cfg.record:
            self.transitions.append(
                (now, h, int(self.state[h]), state, int(self.cls[h]), cls, cause)
            )
        self.state[h] = state
        self.cls[h] = cls
        self._update_tiers(h, state, cls)
        self.deadline[h] = (
            np.inf if state == EMPTY else now + self.cfg.deadline_factor * _CLASS_UPPER_S[cls]
        )

    def _update_tiers(self, h: int, state: int, cls: int) -> None:
        """LAVA's level of host ``h`` for a VM of each class (LAVA paper §4.3, lower first).

        §4.3's scoring order: recycling hosts of a higher class (closer first), open hosts of the
        VM's class, "any non-empty host", empty hosts. By default (``lava_strict`` off) a
        recycling host of the VM's class or lower is one of "any non-empty host", as the scoring
        order reads literally; with ``lava_strict`` it ranks below the empty hosts ("recycling
        hosts only receive VMs that are at least one lifetime class lower"), so it takes such a
        VM only when nothing else fits and the rule never rejects a VM Best Fit places.
        """
        below = LAVA_LAST_RESORT if self.cfg.lava_strict else LAVA_OTHER_NON_EMPTY
        for vc in range(1, 5):
            if state == EMPTY:
                tier = LAVA_EMPTY
            elif state == RECYCLING:
                # the closer the class, the more preferred
                tier = cls - vc - 1 if cls > vc else below
            elif cls == vc:
                tier = LAVA_OPEN_SAME
            else:
                tier = LAVA_OTHER_NON_EMPTY
            self.tiers[vc][h] = tier

    def _all_residual(self, h: int) -> None:
        row = self.slots[h]
        self.residual[row[row >= 0]] = True
        self.residual_left[h] = self.n_vms[h]

    def _score(self, v: int, now: float) -> FloatArray:
        """The lexicographic key of every host for VM ``v`` (lower is better)."""
        policy = self.cfg.policy
        key: FloatArray = self.masked[self.vm_shape[v]]
        if policy == "best-fit":
            return key
        host_exit = np.maximum(self.host_exit, now)
        if policy == "la-binary":
            host_long = host_exit - now >= LA_BINARY_CUTOFF_HOURS * HOUR_S
            tier = np.where(self.n_vms == 0, 2.0, np.where(host_long == self.vm_long[v], 0.0, 1.0))
            return np.asarray(tier * 4.0 + key, dtype=np.float64)
        delta = self.fixed_exit[v] - host_exit
        cost = np.searchsorted(_LAS_BOUNDS_S, delta, side="right") - 1
        key = np.asarray(cost * 4.0 + key, dtype=np.float64)
        if policy == "las":
            return key
        return np.asarray(self.tiers[self.vm_class[v]] * 64.0 + key, dtype=np.float64)

    def _place(self, v: int, now: float) -> None:
        c, m = self.cores[v], self.memory[v]
        key = self._score(v, now)
        h = int(key.argmin())
        if key[h] == np.inf:
            self.rejected += 1
            return
        self._add(v, h, c, m)
        was_empty = self.count[h] == 1
        if was_empty:
            self.n_empty -= 1
            if self.t0 <= now <= self.t1:
                self.peak_used = max(self.peak_used, self.cfg.hosts - self.n_empty)
        if self.uses_exit:
            self.host_exit[h] = max(self.host_exit[h], self.fixed_exit[v])
        if self.cfg.policy == "lava":
            self._lava_after_place(h, v, now, was_empty)

    def _host_changed(self, h: int, fc: float, fm: float) -> None:
        full = fc / self.cfg.host_cores + fm / self.cfg.host_memory_gb
        self.fullness[h] = full
        masked = self.masked
        for j, (sc, sm) in enumerate(zip(self.shape_c, self.shape_m, strict=True)):
            masked[j, h] = full if sc <= fc and sm <= fm else np.inf

    def _add(self, v: int, h: int, c: float, m: float) -> None:
        """Host ``h`` takes VM ``v``: Python lists hold the scalars, numpy arrays mirror them."""
        fc = self.free_c_l[h] = self.free_c_l[h] - c
        fm = self.free_m_l[h] = self.free_m_l[h] - m
        self.free_c[h], self.free_m[h] = fc, fm
        self._host_changed(h, fc, fm)
        self.count[h] += 1
        self.n_vms[h] = self.count[h]
        slot = self.free_slots[h].pop()
        self.slots[h, slot] = v
        self.host_of[v], self.slot_of[v] = h, slot

    def _lava_after_place(self, h: int, v: int, now: float, was_empty: bool) -> None:
        if was_empty:
            self._set_state(h, OPEN, int(self.vm_class[v]), now, "first VM")
        if self.state[h] == OPEN:
            cfg = self.cfg
            used_c = 1.0 - self.free_c[h] / cfg.host_cores
            used_m = 1.0 - self.free_m[h] / cfg.host_memory_gb
            if used_c > cfg.lava_fill or used_m > cfg.lava_fill:
                self._set_state(h, RECYCLING, int(self.cls[h]), now, "full")
                self._all_residual(h)

    def _remove(self, v: int, now: float) -> None:
        h = int(self.host_of[v])
        if h < 0:
            return
        cfg = self.cfg
        self.count[h] -= 1
        self.n_vms[h] = self.count[h]
        slot = int(self.slot_of[v])
        self.slots[h, slot] = -1
        self.free_slots[h].append(slot)
        if self.count[h] == 0:
            # an empty host is exactly free: no rounding drift survives a host's emptying
            fc, fm = cfg.host_cores, cfg.host_memory_gb
            self.n_empty += 1
            self.host_exit[h] = -np.inf
        else:
            fc = self.free_c_l[h] + self.cores[v]
            fm = self.free_m_l[h] + self.memory[v]
            if self.uses_exit and not self.repredict:
                row = self.slots[h]
                self.host_exit[h] = self.fixed_exit[row[row >= 0]].max()
        self.free_c_l[h], self.free_m_l[h] = fc, fm
        self.free_c[h], self.free_m[h] = fc, fm
        self._host_changed(h, fc, fm)
        if cfg.policy == "lava":
            self._lava_after_remove(h, v, now)

    def _lava_after_remove(self, h: int, v: int, now: float) -> None:
        if self.count[h] == 0:
            self.residual_left[h] = 0
            self._set_state(h, EMPTY, 0, now, "last VM left")
            return
        if not self.residual[v]:
            return
        self.residual_left[h] -= 1
        if self.residual_left[h] == 0 and self.state[h] == RECYCLING:
            self.lowerings += 1
            self._set_state(h, RECYCLING, max(int(self.cls[h]) - 1, 1), now, "residual VMs left")
            self._all_residual(h)

    def _lava_deadlines(self, now: float) -> None:
        for h in np.flatnonzero(self.deadline < now).tolist():
            self.misses += 1
            self._set_state(h, RECYCLING, min(int(self.cls[h]) + 1, 4), now, "deadline")
            self._all_residual(h)

    def _refresh(self, now: float) -> None:
        """Every host's latest repredicted VM exit at ``now`` (LAVA paper §4.2)."""
        run = self.slots[self.slots >= 0]
        age_h = np.asarray((now - self.s.created_s[run]) / HOUR_S, dtype=np.float64)
        rem = expected_remaining_hours(
            self.shape[run], self.rate_h[run], age_h, self.cfg.horizon_hours
        )
        self.host_exit.fill(-np.inf)
        np.maximum.at(self.host_exit, self.host_of[run], now + rem * HOUR_S)

    # -- time ------------------------------------------------------------------------------
    def _advance(self, a: float, b: float) -> None:
        """The state between events at ``a`` and ``b``: metric area and checkpoints in [a, b)."""
        lo, hi = max(a, self.t0), min(b, self.t1)
        if hi > lo:
            self.area += self.n_empty * (hi - lo)
        cfg = self.cfg
        while self.next_series < b and self.next_series < self.t1:
            self.series.append((self.next_series, 100.0 * self.n_empty / cfg.hosts))
            self.next_series += HOUR_S
        while cfg.inflation_every_s > 0 and self.next_inflation < min(b, self.t1):
            if self.next_inflation >= a:
                fc, fm = inflation_stranding(self.free_c, self.free_m, self.shapes, self.draws)
                self.stranded.append(
                    (
                        100.0 * fc / (cfg.hosts * cfg.host_cores),
                        100.0 * fm / (cfg.hosts * cfg.host_memory_gb),
                    )
                )
            self.next_inflation += cfg.inflation_every_s
        while cfg.defrag_every_s > 0 and self.next_defrag < min(b, self.t1):
            if self.next_defrag >= a and cfg.policy == "best-fit":
                self._defragment(self.next_defrag)
            self.next_defrag += cfg.defrag_every_s

    def _defragment(self, now: float) -> None:
        """LARS vs a lifetime-blind order on the hosts a defragmenter would pick now (§4.4, §6.3)."""
        busy = np.flatnonzero(self.n_vms > 0)
        if busy.size == 0:
            return
        pick = busy[np.lexsort((-self.fullness[busy], self.n_vms[busy]))][: self.cfg.defrag_hosts]
        # the baseline is lifetime-blind: drain host after host, each host's VMs in random order
        rows = [self.slots[h][self.slots[h] >= 0] for h in pick.tolist()]
        vms = np.concatenate([self.defrag_rng.permutation(r) for r in rows]).astype(np.int64)
        true_rem = np.asarray(self.s.deleted_s[vms] - now, dtype=np.float64)
        age_h = np.asarray((now - self.s.created_s[vms]) / HOUR_S, dtype=np.float64)
        pred = expected_remaining_hours(
            self.shape[vms], self.rate_h[vms], age_h, self.cfg.horizon_hours
        )
        k, d = self.cfg.migration_slots, self.cfg.migration_s
        self.defrag.append(
            (
                now / HOUR_S,
                int(vms.size),
                migrations_needed(true_rem, k, d),
                migrations_needed(true_rem[np.argsort(-pred, kind="stable")], k, d),
                migrations_needed(true_rem[np.argsort(-true_rem, kind="stable")], k, d),
            )
        )

    def run(self) -> ReplayResult:
        times, kinds, vms = _event_order(self.s)
        cur = float(times[0]) if len(times) else 0.0
        stale = True
        lava = self.cfg.policy == "lava"
        place, remove = self._place, self._remove
        for t, k, v in zip(times.tolist(), kinds.tolist(), vms.tolist(), strict=True):
            if t != cur:
                self._advance(cur, t)
                cur, stale = t, True
                if lava:
                    self._lava_deadlines(t)
            if k == 0:
                remove(v, t)
                continue
            if stale and self.repredict and t >= self.next_refresh:
                self._refresh(t)
                self.next_refresh = t + self.cfg.repredict_every_s
            stale = False
            place(v, t)
        self._advance(cur, max(cur, self.t1) + 1.0)
        return self._result(len(times))

    def _result(self, events: int) -> ReplayResult:
        cfg = self.cfg
        span = self.t1 - self.t0
        mean_empty = self.area / span if span > 0 else float("nan")
        stranded = np.asarray(self.stranded) if self.stranded else np.full((1, 2), np.nan)
        series = np.asarray(self.series) if self.series else np.zeros((0, 2))
        return ReplayResult(
            pool=self.pool,
            policy=cfg.policy,
            predictor=cfg.predictor,
            hosts=cfg.hosts,
            vms=len(self.s),
            events=events,
            empty_host_pct=100.0 * mean_empty / cfg.hosts,
            hosts_used_mean=cfg.hosts - mean_empty,
            hosts_used_peak=self.peak_used,
            stranded_cpu_pct=float(stranded[:, 0].mean()),
            stranded_memory_pct=float(stranded[:, 1].mean()),
            rejected_vms=self.rejected,
            deadline_misses=self.misses,
            class_lowerings=self.lowerings,
            series_hours=series[:, 0] / HOUR_S,
            series_empty_pct=series[:, 1],
            defrag=tuple(self.defrag),
            host_of=self.host_of.copy() if cfg.record else None,
            transitions=tuple(self.transitions),
        )


def replay(item: ReplayInput) -> ReplayResult:
    """Replay ``item.stream`` on ``item.config.hosts`` hosts under ``item.config.policy``.

    Module-level and a function of its argument alone, so a Dask client's ``map`` can run it.
    """
    return _Replay(item).run()
