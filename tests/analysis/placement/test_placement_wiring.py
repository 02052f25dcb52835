"""Placement stage wiring: the code between the replay kernel and the summary.

Every expected value is worked out by hand in the comments: a summary that averages the wrong
replays, subtracts another pool's baseline, counts LARS sets of the wrong policy, swaps a ratio of
the predictor's hierarchy or scores censored VMs fails here.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from placement_helpers import write_export, write_lake

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_outputs import read_summary
from tracelab.analysis.placement.model import (
    LifetimePrior,
    deployment_posteriors,
    feature_posteriors,
    predicted_classes,
    predicted_long,
)
from tracelab.analysis.placement.options import PlacementParams
from tracelab.analysis.placement.replay import ReplayResult, replay
from tracelab.analysis.placement.stage import (
    _check,
    _curve_table,
    _lars_table,
    _pools_table,
    _replay_pairs,
    _series_table,
    _wilson,
    placement_results,
    placement_summary,
    placement_tables,
    prediction_quality,
    predictions,
    replay_inputs,
    replays_table,
    saved_share_interval,
)
from tracelab.analysis.placement.stream import VmStream

H = 3600
CENSORED = 2_591_700
PRIOR = LifetimePrior(shape=2.0, rate_hours=40.0, record="test")


def _result(
    pool: int,
    policy: str,
    predictor: str,
    empty: float,
    *,
    vms: int,
    cpu: float = 0.0,
    defrag: tuple[tuple[float, int, int, int, int], ...] = (),
) -> ReplayResult:
    return ReplayResult(
        pool=pool,
        policy=policy,
        predictor=predictor,
        hosts=10,
        vms=vms,
        events=2 * vms,
        empty_host_pct=empty,
        hosts_used_mean=10 - empty / 10,
        hosts_used_peak=9,
        stranded_cpu_pct=cpu,
        stranded_memory_pct=2 * cpu,
        rejected_vms=1,
        deadline_misses=0,
        class_lowerings=0,
        series_hours=np.zeros(0),
        series_empty_pct=np.zeros(0),
        defrag=defrag,
    )


def _results() -> list[ReplayResult]:
    # pool 0: Best Fit 10% empty, LAVA 13, LAS oracle 15; pool 1: 20, 19, 26
    return [
        _result(0, "best-fit", "none", 10.0, vms=100, cpu=4.0, defrag=((1.0, 10, 8, 7, 6),)),
        _result(0, "lava", "model", 13.0, vms=100, cpu=2.0, defrag=((1.0, 99, 99, 0, 0),)),
        _result(0, "las", "oracle", 15.0, vms=100, cpu=1.0),
        _result(1, "best-fit", "none", 20.0, vms=50, cpu=6.0, defrag=((2.0, 5, 4, 4, 2),)),
        _result(1, "lava", "model", 19.0, vms=50, cpu=3.0),
        _result(1, "las", "oracle", 26.0, vms=50, cpu=5.0),
    ]


def test_summary_subtracts_each_pools_own_baseline_and_averages_over_pools() -> None:
    s = placement_summary(_results(), PlacementParams(pool_hosts=(10, 10)), 1.0)
    # lava/model: (13 - 10 + 19 - 20) / 2 = 1.0; las/oracle: (5 + 6) / 2 = 5.5
    assert s.improvement_pp == {"las/oracle": 5.5, "lava/model": 1.0}
    assert s.empty_host_pct == {"best-fit/none": 15.0, "las/oracle": 20.5, "lava/model": 16.0}
    assert s.stranded_cpu_pct == {"best-fit/none": 5.0, "las/oracle": 3.0, "lava/model": 2.5}
    assert s.stranded_memory_pct["lava/model"] == 5.0
    # VMs once per pool (the baseline's: 100 + 50); events (2 per VM) and rejections (1) over
    # every replay: 3 x 200 + 3 x 100 and 6
    assert (s.vms, s.events, s.rejected_vms, s.replays) == (150, 900, 6, 6)
    # the stored intervals: lava/model's per-pool gains 3 and −1 (mean 1, sd 2√2): the t
    # interval 1 ± t(0.975, 1) · 2√2 / √2 = 1 ± 12.706 · 2; las/oracle's 5 and 6: 5.5 ± 12.706 / 2
    lava = s.to_dict()["improvement_pp_interval"]["lava/model"]
    assert (lava["value"], lava["n"], lava["events"]) == (1.0, 2, None)
    assert lava["low"] == pytest.approx(1 - 12.7062 * 2, abs=1e-3)
    assert lava["high"] == pytest.approx(1 + 12.7062 * 2, abs=1e-3)
    las = s.improvement_pp_interval["las/oracle"]
    assert las["high"] - las["value"] == pytest.approx(12.7062 / 2, abs=1e-3)
    assert "best-fit/none" not in s.improvement_pp_interval


def test_lars_totals_come_from_the_best_fit_replays_only() -> None:
    s = placement_summary(_results(), PlacementParams(pool_hosts=(10, 10)), 1.0)
    # sets (10, 8, 7, 6) and (5, 4, 4, 2); LAVA's (99, 99, 0, 0) is not a defragmentation set
    assert (s.lars_sets, s.lars_baseline_migrations) == (2, 12)
    assert (s.lars_model_migrations, s.lars_oracle_migrations) == (11, 8)
    assert s.lars_saved_migrations == 1
    assert s.lars_saved_pct == pytest.approx(100 / 12)
    assert s.lars_oracle_saved_pct == pytest.approx(400 / 12)


def test_lars_intervals_resample_whole_defragmentation_sets() -> None:
    s = placement_summary(_results(), PlacementParams(pool_hosts=(10, 10)), 1.0)
    # set A (8 -> 7 with LARS, 6 with the oracle), set B (4 -> 4, 2). A resample of two sets is
    # AA, AB or BB with probabilities 1/4, 1/2, 1/4; LARS saves 2/16 = 12.5%, 1/12 = 8.3% or 0/8
    # = 0%, so with 2,000 resamples ~500 are 0 and ~500 are 12.5: the 2.5% and 97.5% points are
    # the extremes. The oracle saves 4/16 = 25%, 4/12 = 33.3% or 4/8 = 50%.
    assert s.lars_saved_pct_ci == (0.0, 12.5)
    assert s.lars_oracle_saved_pct_ci == (25.0, 50.0)
    d = s.to_dict()
    assert d["lars_saved_pct_ci"] == [0.0, 12.5]
    assert d["lars_oracle_saved_pct_ci"] == [25.0, 50.0]
    # the LAVA paper's LARS reductions (Table 2: 4.32% and 4.55%) beside this run's
    assert d["paper_lars_reduction_pct"] == [4.32, 4.55]
    assert "bootstrap" in d["lars_interval_method"]
    assert d["headline"] == {
        "key": "improvement_pp_la_binary_oracle",
        "condition": "LA-Binary with oracle lifetimes: empty hosts (% of the pool) minus Best "
        f"Fit's, mean over 2 pools of 10, 10 hosts ({s.vms:,} VMs, {s.source})",
    }
    # one set: every resample is that set, so the interval is the point (100 x 1 / 8 = 12.5)
    one = placement_summary(_results()[:3], PlacementParams(pool_hosts=(10,)), 1.0)
    assert one.lars_saved_pct_ci == (12.5, 12.5)


def test_tables_carry_per_pool_improvements_and_their_range() -> None:
    streams = [_stream([0, H], [2 * H, 2 * H], [2.0, 4.0])] * 2
    tables = placement_tables(_results(), streams, PlacementParams(pool_hosts=(10, 10)), PRIOR)
    lava = tables["replays"].filter(policy="lava").sort("pool")
    assert lava["improvement_pp"].to_list() == [3.0, -1.0]
    las = tables["improvement"].filter(policy="las").row(0, named=True)
    assert (las["improvement_pp_min"], las["improvement_pp_max"], las["pools"]) == (5.0, 6.0, 2)
    assert las["improvement_pp_mean"] == 5.5


def test_pool_load_is_core_hours_over_the_span_and_the_pools_cores() -> None:
    # 2 cores x 2 h + 4 cores x 1 h = 8 core-hours over a 1 h span (last creation) on 2 x 4 cores
    stream = _stream([0, H], [2 * H, 2 * H], [2.0, 4.0])
    table = _pools_table([stream], PlacementParams(pool_hosts=(2,), host_cores=4))
    assert table["mean_load"].to_list() == [1.0]
    assert table["deployments"].to_list() == [2]


def _stream(
    created: list[int],
    deleted: list[int],
    cores: list[float],
    dep: list[int] | None = None,
    sub: list[int] | None = None,
) -> VmStream:
    n = len(created)
    return VmStream(
        np.asarray(created, dtype=np.int64),
        np.asarray(deleted, dtype=np.int64),
        np.asarray(cores, dtype=np.float64),
        2.0 * np.asarray(cores, dtype=np.float64),
        np.asarray(dep if dep is not None else range(n), dtype=np.int64),
        None if sub is None else np.asarray(sub, dtype=np.int64),
        None,
    )


def test_feature_posteriors_chain_group_subscription_and_deployment() -> None:
    """A (deployment 0, subscription 0) lives 0-1 h; B (deployment 1, subscription 0) and C
    (deployment 2, subscription 1) are created at 2 h. Prior Gamma(2, 40 h): mean rate 0.05/h,
    two pseudo-deaths per level.

    A: no history, rate 40. At 2 h everyone's history is A's one death over 1 h:
    r_all = (1 + 2) / (1 + 2 / 0.05) = 3/41; the group is everyone: r_grp = 3 / (1 + 2 / r_all)
    = 9/85; B's subscription saw A (another deployment): r_sub = 3 / (1 + 2 / r_grp) = 27/179.
    Rate = 40 * r_all / r_sub: B 40 * (3/41) / (27/179) = 19.404..., C (no subscription history,
    r_sub = r_grp) 40 * (3/41) / (9/85) = 27.642...; no VM has deployment history: shape 2.
    """
    s = _stream([0, 2 * H, 2 * H], [H, 5 * H, 5 * H], [1.0] * 3, dep=[0, 1, 2], sub=[0, 0, 1])
    shape, rate = feature_posteriors(
        PRIOR, s.deployment, s.subscriptions, s.groups, s.created_s, s.deleted_s
    )
    assert shape.tolist() == [2.0, 2.0, 2.0]
    assert rate == pytest.approx([40.0, 40 * (3 / 41) / (27 / 179), 40 * (3 / 41) / (9 / 85)])


def test_options_switch_the_predictors_features() -> None:
    # deployment 0 has two VMs: the second (created at 2 h) saw the first die at 1 h
    s = _stream([0, 2 * H, 2 * H], [H, 5 * H, 5 * H], [1.0] * 3, dep=[0, 0, 1], sub=[0, 0, 1])
    base = PlacementParams(pool_hosts=(2,))
    dep_only = predictions(replace(base, feature_history=False), s, PRIOR)
    expected = deployment_posteriors(PRIOR, s.deployment, s.created_s, s.deleted_s)
    assert dep_only[0].tolist() == expected[0].tolist() == [2.0, 3.0, 2.0]
    assert dep_only[1].tolist() == expected[1].tolist() == [40.0, 41.0, 40.0]
    none = predictions(replace(base, feature_history=False, deployment_history=False), s, PRIOR)
    assert none[0].tolist() == [2.0] * 3
    assert none[1].tolist() == [40.0] * 3
    # features without deployment history: no VM's shape moves, the rates do
    feat = predictions(replace(base, deployment_history=False), s, PRIOR)
    assert feat[0].tolist() == [2.0] * 3
    assert feat[1][1] < 40.0
    # replay_inputs hands every replay of a pool the same predictions
    items = replay_inputs(base, [s], PRIOR)
    full = predictions(base, s, PRIOR)
    assert {(it.config.policy, it.config.predictor) for it in items} >= {("lava", "model")}
    for it in items:
        assert it.shape.tolist() == full[0].tolist()
        assert it.rate_hours.tolist() == full[1].tolist()


def _exp_like(mean_hours: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Lomax with a huge shape is the exponential of that mean."""
    k = np.full(len(mean_hours), 1e6)
    return k, k * np.asarray(mean_hours)


def test_most_probable_class_of_an_exponential_lifetime() -> None:
    # mean 0.1 h: P(< 1 h) ~ 1; mean 5 h: P(1-10 h) = e^-0.2 - e^-2 = 0.68; mean 50 h:
    # P(10-100 h) = e^-0.2 - e^-2 = 0.68; mean 1000 h: P(>= 100 h) = e^-0.1 = 0.90
    shape, rate = _exp_like([0.1, 5.0, 50.0, 1000.0])
    assert predicted_classes(shape, rate).tolist() == [1, 2, 3, 4]
    # P(T >= 2 h) = e^-20, e^-0.4, e^-0.04, e^-0.002: short only for the first
    assert predicted_long(shape, rate).tolist() == [False, True, True, True]


def test_class_accuracy_skips_unknown_classes_and_reports_the_baseline() -> None:
    """VMs: 0.5 h (LC1), 5 h (LC2), 50 h (LC3), alive at the end after 30 h (class unknown; long
    for LA-Binary), alive after 200 h (LC4). Predicted means 0.1, 50, 50, 0.1, 1000 h give
    classes 1, 3, 3, 1, 4: 3 of the 4 known classes right; binary 4 of 5 (the 30 h VM is called
    short)."""
    created = [0, 0, 0, CENSORED - 30 * H, CENSORED - 200 * H]
    deleted = [H // 2, 5 * H, 50 * H, CENSORED, CENSORED]
    s = _stream(created, deleted, [1.0] * 5)
    q = prediction_quality([s], [_exp_like([0.1, 50.0, 50.0, 0.1, 1000.0])])
    assert q["class_vms"] == 4
    assert q["class_accuracy"] == 0.75
    assert q["true_class_shares"] == [0.25] * 4
    assert q["majority_class_share"] == 0.25
    assert q["predicted_class_shares"] == [0.25, 0.0, 0.5, 0.25]
    assert (q["binary_vms"], q["binary_accuracy"]) == (5, 0.8)
    # Wilson 95% for 3 of 4 (published tables: 0.301-0.954)
    assert q["class_accuracy_ci"] == pytest.approx([0.3006, 0.9544], abs=1e-4)


def test_wilson_interval_edges() -> None:
    lo, hi = _wilson(0, 10)
    assert lo == pytest.approx(0.0, abs=1e-12)
    assert hi == pytest.approx(0.2775, abs=1e-4)
    assert all(np.isnan(_wilson(0, 0)))


def test_summary_carries_the_prediction_quality() -> None:
    quality = {"class_accuracy": 0.75, "class_vms": 4}
    s = placement_summary(_results(), PlacementParams(pool_hosts=(10, 10)), 1.5, quality)
    assert s.prediction == quality
    assert s.seconds == 1.5
    assert placement_summary(_results(), PlacementParams(pool_hosts=(10, 10)), 1.0).prediction == {}


def test_replay_pairs_run_best_fit_once_and_la_binary_without_one_shot() -> None:
    params = PlacementParams(
        policies=("best-fit", "la-binary", "lava"), predictors=("one-shot", "model")
    )
    # Best Fit once without a predictor; LA-Binary's one-shot run is its model run: skipped,
    # and the predictors after it still run
    assert _replay_pairs(params) == [
        ("best-fit", "none"),
        ("la-binary", "model"),
        ("lava", "one-shot"),
        ("lava", "model"),
    ]


def test_series_table_is_sorted_by_pool_first() -> None:
    first = replace(_results()[4], series_hours=np.array([1.0]), series_empty_pct=np.array([5.0]))
    second = replace(_results()[0], series_hours=np.array([1.0]), series_empty_pct=np.array([7.0]))
    # pool 1's LAVA comes first in the results, pool 0's Best Fit second
    table = _series_table([first, second])
    assert table["pool"].to_list() == [0, 1]
    assert table["empty_host_pct"].to_list() == [7.0, 5.0]


def test_check_names_the_option_to_fix() -> None:
    with pytest.raises(TracelabError, match="--pool-hosts"):
        _check(PlacementParams(pool_hosts=()))
    with pytest.raises(TracelabError, match="--predictors"):
        _check(PlacementParams(predictors=()))
    with pytest.raises(TracelabError, match=r"target.load"):
        _check(PlacementParams(target_load=2.0))
    # Best Fit alone needs no predictor
    _check(PlacementParams(policies=("best-fit",), predictors=()))


def test_stage_entry_replays_the_chosen_source_and_writes_its_summary(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_lake(data)
    write_export(data)
    params = PlacementParams(
        pool_hosts=(4,),
        host_cores=32,
        host_memory_gb=64.0,
        target_load=0.35,
        policies=("best-fit", "las"),
        predictors=("model",),
    )
    for source in ("vmtable", "params"):
        out = tmp_path / source
        seen: list[tuple[int, int, str]] = []
        summary = placement_results(
            replace(params, source=source), data, out, progress=lambda *a, into=seen: into.append(a)
        )
        # one pool, Best Fit and LAS/model: 2 replays, in one map
        assert seen == [(0, 2, "replays"), (2, 2, "replays")]
        assert (summary.source, summary.replays) == (source, 2)
        assert read_summary(out) == json.loads(json.dumps(summary.to_dict()))
        pools = pl.read_parquet(out / "pools.parquet")
        assert summary.vms == pools["vms"].sum() > 0
        assert pl.read_parquet(out / "replays.parquet").height == 2
        assert summary.prediction["class_vms"] > 0


def _three_host_workload() -> VmStream:
    """Hand-made pool of 3 hosts of 10 cores (memory 2 GB per core, hosts 20 GB).

    At 0: V0 8 cores, 0.5 h; V1 6 cores, 200 h; V2 7 cores, 20 h. V0 opens host 0; V1 fits
    nowhere but an empty host (host 1); V2 neither on host 0 (2 free) nor host 1 (4 free): host 2
    (3 free). At 300 s V3 (2 cores, 150 h) fits on every host; at 30 h V4 (1 core, 0.5 h) only
    marks the end of the metrics window [0, 30 h].
    """
    h = 3600
    return _stream(
        created=[0, 0, 0, 300, 30 * h],
        deleted=[h // 2, 200 * h, 20 * h, 300 + 150 * h, 30 * h + h // 2],
        cores=[8.0, 6.0, 7.0, 2.0, 1.0],
    )


def test_each_policys_row_follows_its_own_host_lifetime_rule() -> None:
    """V3's host decides every row (oracle lifetimes, so each rule sees the true exits):

    * Best Fit: the fullest host, host 0 (2 free); host 0 then stays busy until 150 h and only
      host 2 empties (at 20 h): 10 of 90 host-hours empty, 11.1%;
    * LA-Binary: V3 is long (>= 2 h); host 0 is short (its exit 0.5 h is < 2 h away), hosts 1
      and 2 long, so Best Fit between them: host 2 (3 free, against 4). Host 0 empties at 0.5 h:
      29.5 of 90, 32.8%;
    * LAS: host exit = its VMs' latest exit; ΔT = V3's exit − host exit is ≤ 0 only on host 1
      (200 h), 149.6 h on host 0 and 130 h on host 2 (cost 9): host 1. Host 0 empties at 0.5 h
      and host 2 at 20 h: 39.5 of 90, 43.9%;
    * LAVA: V3 is LC4 (100-1000 h), host 1 the open LC4 host (V1, 200 h): host 1, as LAS.

    A rule changed for one policy (LA-Binary's cutoff, LAS's latest exit, a host's class) moves
    that policy's row and no other.
    """
    params = PlacementParams(
        pool_hosts=(3,),
        host_cores=10,
        host_memory_gb=20.0,
        predictors=("oracle",),
        warmup_hours=0.0,
        inflation_every_hours=0.0,
        defrag_every_hours=0.0,
    )
    items = replay_inputs(params, [_three_host_workload()], PRIOR)
    items = [replace(it, config=replace(it.config, record=True)) for it in items]
    results = [replay(it) for it in items]
    host_of_v3 = {r.policy: int(r.host_of[3]) for r in results if r.host_of is not None}
    assert host_of_v3 == {"best-fit": 0, "la-binary": 2, "las": 1, "lava": 1}
    rows = replays_table(results)
    got = dict(zip(rows["policy"], rows["empty_host_pct"], strict=True))
    assert got == pytest.approx(
        {
            "best-fit": 100 * 10 / 90,
            "la-binary": 100 * 29.5 / 90,
            "las": 100 * 39.5 / 90,
            "lava": 100 * 39.5 / 90,
        }
    )
    improvement = dict(zip(rows["policy"], rows["improvement_pp"], strict=True))
    assert improvement["las"] == pytest.approx(100 * 29.5 / 90)
    assert (rows["rejected_vms"] == 0).all()


def test_la_binary_classes_a_host_by_its_vms_median_not_mean_lifetime() -> None:
    """LA-Binary with the model: a VM is short when its predicted median lifetime is < 2 h, and
    a host is long when its VMs' latest predicted exit (creation + median) is >= 2 h away.

    Lomax predictions (shape 1, scale b hours): median b, mean within 720 h b·ln(1 + 720/b).
    A and C (b = 1 h: median 1 h, mean 6.6 h) are short, B (b = 10 h) long. 3 hosts of 10
    cores: A (5 cores) opens host 0, B (7 cores) host 1; at 300 s C (2 cores) joins host 0, the
    short host of its class (by the means host 0 would look long too, and Best Fit would pick
    host 1, 3 cores free against 5). A lives 0.5 h and C 0.5 h, so host 0 empties at 2,100 s;
    host 2 stays empty; D at 10 h ends the window: (10 + 10 − 7/12) of 30 host-hours empty.
    """
    h = 3600
    stream = _stream(
        created=[0, 0, 300, 10 * h],
        deleted=[h // 2, 100 * h, 300 + h // 2, 10 * h + h // 2],
        cores=[5.0, 7.0, 2.0, 1.0],
    )
    params = PlacementParams(
        pool_hosts=(3,),
        host_cores=10,
        host_memory_gb=20.0,
        policies=("la-binary",),
        predictors=("model",),
        warmup_hours=0.0,
        inflation_every_hours=0.0,
        defrag_every_hours=0.0,
    )
    items = replay_inputs(params, [stream], PRIOR)
    shape, scale = np.ones(4), np.array([1.0, 10.0, 1.0, 1.0])
    items = [
        replace(it, config=replace(it.config, record=True), shape=shape, rate_hours=scale)
        for it in items
        if it.config.policy == "la-binary"
    ]
    (result,) = [replay(it) for it in items]
    assert result.host_of is not None
    assert result.host_of.tolist()[:3] == [0, 1, 0]
    assert result.empty_host_pct == pytest.approx(100 * (20 - 7 / 12) / 30)


def test_every_replay_option_reaches_the_replays_config() -> None:
    """Each option the replay reads, at a value none of the defaults has, in the config of
    every (policy, predictor) replay of the pool (times in seconds)."""
    params = PlacementParams(
        pool_hosts=(5,),
        host_cores=12,
        host_memory_gb=48.0,
        horizon_hours=100.0,
        warmup_hours=2.0,
        repredict_minutes=15.0,
        inflation_every_hours=6.0,
        inflation_draws=9,
        defrag_every_hours=12.0,
        defrag_hosts=2,
        migration_slots=5,
        migration_minutes=10.0,
        lava_fill=0.8,
        deadline_factor=1.5,
        lava_strict=True,
        seed=4,
    )
    items = replay_inputs(params, [_three_host_workload()], PRIOR)
    assert len(items) == 1 + 3 * 2  # Best Fit once; three policies × (model, oracle)
    for it in items:
        cfg = it.config
        assert (cfg.hosts, cfg.host_cores, cfg.host_memory_gb) == (5, 12.0, 48.0)
        assert (cfg.horizon_hours, cfg.warmup_s, cfg.repredict_every_s) == (100.0, 7200, 900)
        assert (cfg.inflation_every_s, cfg.inflation_draws) == (6 * 3600, 9)
        assert (cfg.defrag_every_s, cfg.defrag_hosts) == (12 * 3600, 2)
        assert (cfg.migration_slots, cfg.migration_s) == (5, 600.0)
        assert (cfg.lava_fill, cfg.deadline_factor, cfg.lava_strict) == (0.8, 1.5, True)
        assert cfg.seed == 4


def test_the_lifetime_record_asked_is_the_prior_the_stage_uses(tmp_path: Path) -> None:
    """Two exported lifetime priors, Gamma(2, 40 h) (marginal) and Gamma(3, 10 h) (two-stage):
    the stage's lifetime curve is the chosen one's, E[T_r | T_u = 0] = b / (a − 1) within 720 h
    restricted to it (unrestricted 40 h and 5 h)."""
    from placement_helpers import _records

    from tracelab.analysis.common.fitted_params import FittedParameter, Quantity, write_stage_params
    from tracelab.analysis.export.document import params_document, write_params_json

    data = tmp_path / "data"
    write_lake(data)
    records = [
        FittedParameter(
            name=r.name,
            distribution=r.distribution,
            parameters={"shape": Quantity(3.0, ""), "rate": Quantity(10.0, "hour")},
            method=r.method,
            n=r.n,
            stage=r.stage,
            trace=r.trace,
        )
        if r.name == "core_lifetime_rate_prior"
        else r
        for r in _records()
    ]
    write_stage_params(data / "results" / "azure-2017" / "priors", records)
    doc = params_document(data, created_at=datetime(2026, 1, 1, tzinfo=UTC), version="0.0.0")
    write_params_json(doc, data / "exports" / "params.json")
    params = PlacementParams(
        pool_hosts=(4,), host_cores=32, host_memory_gb=64.0, policies=("best-fit",)
    )
    for record, mean_hours in (
        ("core_lifetime_rate_prior_marginal", 40.0),
        ("core_lifetime_rate_prior", 5.0),
    ):
        out = tmp_path / record
        placement_results(replace(params, lifetime_record=record), data, out)
        curve = pl.read_parquet(out / "lifetime_curve.parquet")
        at_zero = curve.filter(pl.col("age_hours") == 0.0)
        assert at_zero["expected_remaining_unrestricted_hours"].item() == pytest.approx(
            mean_hours
        ), record


def test_tables_order_and_columns_by_hand() -> None:
    """The improvement table by (policy, predictor) with each policy's mean empty share over the
    pools (LAS 15 and 26: 20.5); the pools table's hosts as asked; the LARS sets by pool, then
    hour, whatever order the baseline replay lists them in."""
    results = _results()
    results[3] = replace(results[3], defrag=((2.0, 5, 4, 4, 2), (1.0, 3, 2, 2, 1)))
    streams = [_stream([0, H], [2 * H, 2 * H], [2.0, 4.0])] * 2
    tables = placement_tables(results, streams, PlacementParams(pool_hosts=(10, 12)), PRIOR)
    improvement = tables["improvement"]
    assert improvement.select("policy", "predictor").rows() == [
        ("best-fit", "none"),
        ("las", "oracle"),
        ("lava", "model"),
    ]
    assert improvement["empty_host_pct"].to_list() == [15.0, 20.5, 16.0]
    assert tables["pools"]["hosts"].to_list() == [10, 12]
    assert _lars_table(results).select("pool", "hour", "vms").rows() == [
        (0, 1.0, 10),
        (1, 1.0, 3),
        (1, 2.0, 5),
    ]


def test_series_table_is_sorted_by_policy_within_a_pool() -> None:
    # pool 0's LAVA replay first, its Best Fit second: Best Fit's row sorts first ("best-fit" <
    # "lava"; by predictor alone "model" < "none" would put LAVA first)
    lava = replace(_results()[1], series_hours=np.array([1.0]), series_empty_pct=np.array([5.0]))
    best = replace(_results()[0], series_hours=np.array([1.0]), series_empty_pct=np.array([7.0]))
    table = _series_table([lava, best])
    assert table["policy"].to_list() == ["best-fit", "lava"]
    assert table["empty_host_pct"].to_list() == [7.0, 5.0]


def test_lifetime_curve_restricted_and_unrestricted_by_hand() -> None:
    """Lomax k = 2, β = 40 h: E[min(T − u, H) | T > u] = (β + u) H / (β + u + H) for k = 2, and
    (β + u) / (k − 1) unrestricted. With H = 60 h: at u = 0, 40 · 60 / 100 = 24 h (40 h
    unrestricted); at u = 24, 64 · 60 / 124 = 30.97 h (64 h)."""
    curve = _curve_table(PRIOR, PlacementParams(horizon_hours=60.0))
    rows = {r["age_hours"]: r for r in curve.iter_rows(named=True)}
    assert rows[0.0]["expected_remaining_hours"] == pytest.approx(24.0)
    assert rows[24.0]["expected_remaining_hours"] == pytest.approx(64 * 60 / 124)
    assert rows[0.0]["expected_remaining_unrestricted_hours"] == pytest.approx(40.0)
    assert rows[24.0]["expected_remaining_unrestricted_hours"] == pytest.approx(64.0)


def test_prediction_quality_with_no_vm_of_known_class() -> None:
    # one VM alive at the end after 1 h: neither its class (LC4 needs 100 h) nor its LA-Binary
    # class (long needs 2 h) is known, so every accuracy is NaN over 0 VMs
    s = _stream([CENSORED - H], [CENSORED], [1.0])
    q = prediction_quality([s], [_exp_like([10.0])])
    assert (q["class_vms"], q["binary_vms"]) == (0, 0)
    assert np.isnan(q["class_accuracy"])
    assert np.isnan(q["binary_accuracy"])


def test_lars_saved_share_is_the_saved_migrations_over_the_baselines() -> None:
    # one set: the baseline order needs 10 migrations, LARS 6, the oracle 5: 40% and 50% saved
    results = [_result(0, "best-fit", "none", 10.0, vms=100, defrag=((1.0, 20, 10, 6, 5),))]
    s = placement_summary(results, PlacementParams(pool_hosts=(10,)), 1.0)
    assert (s.lars_saved_migrations, s.lars_saved_pct, s.lars_oracle_saved_pct) == (4, 40.0, 50.0)


def test_lars_interval_is_seeded() -> None:
    # 30 sets of varied sizes: the same seed gives the same interval, another seed another
    baseline = np.arange(5, 35, dtype=np.int64)
    other = baseline - np.arange(30, dtype=np.int64) % 4
    first = saved_share_interval(baseline, other, 7)
    assert saved_share_interval(baseline, other, 7) == first
    assert saved_share_interval(baseline, other, 8) != first


def test_replays_table_carries_each_replays_counts() -> None:
    # pool 0's replays ran 100 VMs (200 events), pool 1's 50 (100); every replay's peak is 9
    table = replays_table(_results())
    assert set(table["hosts_used_peak"]) == {9}
    assert table.select("pool", "policy", "vms", "events").rows() == [
        (0, "best-fit", 100, 200),
        (0, "las", 100, 200),
        (0, "lava", 100, 200),
        (1, "best-fit", 50, 100),
        (1, "las", 50, 100),
        (1, "lava", 50, 100),
    ]
