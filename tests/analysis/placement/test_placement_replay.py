"""Replay invariants, known-answer workloads and LARS ("Tests (must be able to fail)")."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import numpy.typing as npt
import pytest

from tracelab.analysis.placement.replay import (
    EMPTY,
    OPEN,
    RECYCLING,
    ReplayConfig,
    ReplayInput,
    ReplayResult,
    migrations_needed,
    replay,
)
from tracelab.analysis.placement.stream import VmStream

HOUR = 3600


def _config(
    policy: str, predictor: str, hosts: int, cores: float = 16.0, **kw: float
) -> ReplayConfig:
    base = {
        "warmup_s": 0,
        "inflation_every_s": 0,
        "inflation_draws": 0,
        "defrag_every_s": 0,
        "defrag_hosts": 2,
        "migration_slots": 3,
        "migration_s": 1200.0,
    }
    base.update(kw)
    return ReplayConfig(
        policy=policy,
        predictor=predictor,
        hosts=hosts,
        host_cores=cores,
        host_memory_gb=4.0 * cores,
        horizon_hours=720.0,
        lava_fill=0.9,
        deadline_factor=1.1,
        seed=0,
        record=True,
        **base,  # type: ignore[arg-type]
    )


def _stream(
    created: list[int], deleted: list[int], cores: list[float], mem: list[float] | None = None
) -> VmStream:
    c = np.asarray(cores, dtype=np.float64)
    return VmStream(
        np.asarray(created, dtype=np.int64),
        np.asarray(deleted, dtype=np.int64),
        c,
        np.asarray(mem, dtype=np.float64) if mem is not None else 2.0 * c,
        np.arange(len(created), dtype=np.int64),
    )


def _run(
    stream: VmStream, cfg: ReplayConfig, shape: float = 2.0, rate: float = 40.0
) -> ReplayResult:
    n = len(stream)
    return replay(ReplayInput(0, cfg, stream, np.full(n, shape), np.full(n, rate)))


def _random_stream(seed: int, n: int = 600) -> VmStream:
    rng = np.random.default_rng(seed)
    created = np.sort(rng.integers(0, 600, n)) * 300
    life = np.maximum((rng.pareto(1.2, n) * 2 * HOUR).astype(np.int64) // 300 * 300, 300)
    cores = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    mem = cores * rng.choice([1.0, 2.0, 6.0], n)
    return _stream(list(created), list(created + life), list(cores), list(mem))


def _occupancy_check(stream: VmStream, r: ReplayResult, hosts: int, cores: float) -> float:
    """Rebuild every host's load from the assignments alone; returns the time-averaged empty %."""
    assert r.host_of is not None
    events = sorted(
        [(int(stream.deleted_s[v]), 0, v) for v in range(len(stream))]
        + [(int(stream.created_s[v]), 1, v) for v in range(len(stream))]
    )
    used_c = [0.0] * hosts
    used_m = [0.0] * hosts
    members: list[set[int]] = [set() for _ in range(hosts)]
    t0, t1 = int(stream.created_s.min()), int(stream.created_s.max())
    area, prev = 0.0, t0
    for t, kind, v in events:
        h = int(r.host_of[v])
        if prev < t <= t1:
            area += sum(1 for m in members if not m) * (t - prev)
            prev = t
        if kind == 0:
            members[h].remove(v)  # removed exactly at its delete time, from where it was put
            used_c[h] -= stream.cores[v]
            used_m[h] -= stream.memory_gb[v]
            continue
        assert v not in members[h]
        members[h].add(v)
        used_c[h] += stream.cores[v]
        used_m[h] += stream.memory_gb[v]
        assert used_c[h] <= cores + 1e-9
        assert used_m[h] <= 4.0 * cores + 1e-9
    assert all(not m for m in members)
    return 100.0 * area / (hosts * (t1 - t0))


@pytest.mark.parametrize(
    ("policy", "predictor"),
    [
        ("best-fit", "none"),
        ("la-binary", "model"),
        ("las", "model"),
        ("las", "one-shot"),
        ("lava", "model"),
        ("lava", "oracle"),
    ],
)
def test_every_replay_keeps_capacity_and_places_each_vm_once(policy: str, predictor: str) -> None:
    stream = _random_stream(5)
    hosts = 60
    r = _run(stream, _config(policy, predictor, hosts))
    assert r.rejected_vms == 0
    assert r.host_of is not None
    assert np.all(r.host_of >= 0)
    empty_pct = _occupancy_check(stream, r, hosts, 16.0)
    assert r.empty_host_pct == pytest.approx(empty_pct, rel=1e-9)


def test_a_full_pool_rejects_and_never_overfills() -> None:
    stream = _random_stream(6)
    r = _run(stream, _config("lava", "model", 6))
    assert r.rejected_vms > 0
    assert r.host_of is not None
    placed = np.flatnonzero(r.host_of >= 0)
    _occupancy_check(stream.take(placed), _reindexed(r, placed), 6, 16.0)


def _reindexed(r: ReplayResult, placed: npt.NDArray[np.int64]) -> ReplayResult:
    assert r.host_of is not None
    return replace(r, host_of=r.host_of[placed])


def _allowed(frm: int, to: int, c0: int, c1: int, cause: str) -> bool:
    return {
        "first VM": frm == EMPTY and to == OPEN and 1 <= c1 <= 4,
        "full": frm == OPEN and to == RECYCLING and c1 == c0,
        "last VM left": frm in (OPEN, RECYCLING) and to == EMPTY and c1 == 0,
        "residual VMs left": frm == RECYCLING and to == RECYCLING and c1 == max(c0 - 1, 1),
        "deadline": frm in (OPEN, RECYCLING) and to == RECYCLING and c1 == min(c0 + 1, 4),
    }[cause]


@pytest.mark.parametrize(("predictor", "seed"), [("model", 5), ("oracle", 7)])
def test_lava_state_changes_only_as_lava_defines_them(predictor: str, seed: int) -> None:
    r = _run(_random_stream(seed), _config("lava", predictor, 40))
    assert r.transitions
    last: dict[int, tuple[int, int]] = {}
    causes = set()
    for _, h, frm, to, c0, c1, cause in r.transitions:
        assert _allowed(frm, to, c0, c1, cause), (frm, to, c0, c1, cause)
        assert last.get(h, (EMPTY, 0)) == (frm, c0)  # a host's history is one chain
        last[h] = (to, c1)
        causes.add(cause)
    assert {"first VM", "full", "last VM left"} <= causes


def _two_class_workload(bursts: int = 6) -> VmStream:
    """Classes that never mix in an oracle's placement: 1 h VMs of 10 cores and 300 h VMs.

    The first VM (8 cores, long) opens the long host; every burst brings three 10-core short VMs
    (they never fit beside it) and then one 1-core long VM. Best Fit puts the long VM on the
    fullest host — a short host — which then stays busy for 300 h.
    """
    created, deleted, cores = [0], [300 * HOUR], [8.0]
    for k in range(1, bursts + 1):
        t = 2 * k * HOUR
        created += [t, t, t, t]
        deleted += [t + HOUR] * 3 + [t + 300 * HOUR]
        cores += [10.0, 10.0, 10.0, 1.0]
    created.append(100 * HOUR)  # the metrics run until the last creation
    deleted.append(101 * HOUR)
    cores.append(1.0)
    return _stream(created, deleted, cores)


def test_oracle_las_and_lava_keep_the_classes_apart_and_beat_best_fit() -> None:
    stream = _two_class_workload()
    longs = [i for i in range(len(stream)) if stream.deleted_s[i] - stream.created_s[i] > HOUR]
    results = {
        p: _run(stream, _config(p, "none" if p == "best-fit" else "oracle", 8))
        for p in ("best-fit", "las", "lava")
    }
    for policy in ("las", "lava"):
        host_of = results[policy].host_of
        assert host_of is not None
        assert len({int(host_of[i]) for i in longs}) == 1, policy
        assert results[policy].empty_host_pct > results["best-fit"].empty_host_pct, policy
    bf = results["best-fit"].host_of
    assert bf is not None
    assert len({int(bf[i]) for i in longs}) == 2


def test_always_wrong_predictions_fire_lava_deadlines_and_raise_classes() -> None:
    stream = _two_class_workload()
    # every VM predicted to live ~0.1 h (class LC1): the long ones overstay their deadlines
    wrong = _run(stream, _config("lava", "model", 8), shape=1000.0, rate=100.0)
    right = _run(stream, _config("lava", "oracle", 8))
    assert right.deadline_misses == 0
    assert wrong.deadline_misses > 0
    raised = [(c0, c1) for *_, c0, c1, cause in wrong.transitions if cause == "deadline"]
    assert raised
    assert all(c1 == min(c0 + 1, 4) for c0, c1 in raised)
    assert max(c1 for _, c1 in raised) >= 3


def _migrations_by_rounds(remaining: list[float], slots: int, duration: float) -> int:
    """The same process written as rounds: every ``duration`` the next ``slots`` live VMs go."""
    queue = list(remaining)
    done, now = 0, 0.0
    while queue:
        queue = [r for r in queue if r > now]
        batch, queue = queue[:slots], queue[slots:]
        done += len(batch)
        now += duration
    return done


def test_migration_count_matches_a_round_by_round_simulation() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(0, 25))
        rem = rng.exponential(3000.0, n)
        slots = int(rng.integers(1, 5))
        assert migrations_needed(rem, slots, 1200.0) == _migrations_by_rounds(
            list(rem), slots, 1200.0
        )


def test_lars_never_migrates_more_than_the_trace_order() -> None:
    rng = np.random.default_rng(12)
    for _ in range(500):
        n = int(rng.integers(1, 30))
        rem = rng.choice([rng.exponential(2000.0, n), rng.pareto(1.1, n) * 600.0])
        base = migrations_needed(rem, 3, 1200.0)
        lars = migrations_needed(np.sort(rem)[::-1], 3, 1200.0)
        assert lars <= base
    # exhaustively on small sets: longest-first is the best of every order
    for rem in itertools.product((500.0, 1500.0, 3000.0, 5000.0), repeat=5):
        best = min(migrations_needed(np.asarray(p), 2, 1200.0) for p in itertools.permutations(rem))
        assert migrations_needed(np.sort(rem)[::-1], 2, 1200.0) == best


def _recycling_workload() -> VmStream:
    h = HOUR
    return _stream(
        created=[0, 300, 600, 900],
        deleted=[50 * h, 50 * h, 5 * h, 500 * h],
        cores=[19.0, 1.0, 1.0, 1.0],
    )


def test_lava_scoring_order_lets_any_non_empty_host_take_a_vm_before_an_empty_one() -> None:
    """Default reading of LAVA paper §4.3's scoring order. Hand-built, oracle classes: VM 0 (19 of
    20 cores, LC3) turns host 0 recycling at once; VM 1 (LC3) joins it ("any non-empty host")
    rather than open host 1, and fills it (20 of 20 cores); VM 2 (LC2) opens host 1; VM 3 (LC4)
    joins host 1, open but of another class, before an empty host."""
    r = _run(_recycling_workload(), _config("lava", "oracle", 3, cores=20.0))
    assert r.host_of is not None
    assert r.host_of.tolist() == [0, 0, 1, 1]


def test_lava_strict_recycling_hosts_take_only_strictly_lower_classes() -> None:
    """``lava_strict``: a recycling host gets a VM of its own class or a higher one only when
    nothing else fits. VM 1 (LC3) must open host 1 rather than join the LC3 recycling host; VM 2
    (LC2) goes to the recycling LC3 host (one class lower, the most preferred level); VM 3 (LC4)
    finds host 0 full and joins host 1, open but of class LC3 (non-empty before empty)."""
    cfg = replace(_config("lava", "oracle", 3, cores=20.0), lava_strict=True)
    r = _run(_recycling_workload(), cfg)
    assert r.host_of is not None
    assert r.host_of.tolist() == [0, 1, 0, 1]
    states = [(hh, s1, c1) for _, hh, _, s1, _, c1, _ in r.transitions]
    assert states[:2] == [(0, OPEN, 3), (0, RECYCLING, 3)]
    assert (1, OPEN, 3) in states


def test_lava_last_resort_is_a_same_class_recycling_host_not_a_rejection() -> None:
    h = HOUR
    stream = _stream(created=[0, 300], deleted=[50 * h, 50 * h], cores=[19.0, 1.0])
    r = _run(stream, replace(_config("lava", "oracle", 1, cores=20.0), lava_strict=True))
    assert r.rejected_vms == 0
    assert r.host_of is not None
    assert r.host_of.tolist() == [0, 0]
