"""The admission stage's wiring on hand-made inputs: tuning, pooling, configurations.

The simulator and the moments have their own tests; these check the code between them and the
summary, on numbers worked out by hand in the comments.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from admission_helpers import PRIORS, write_params

from tracelab.analysis.admission.importance import importance_scheme
from tracelab.analysis.admission.model import admission_priors
from tracelab.analysis.admission.options import AdmissionParams
from tracelab.analysis.admission.sim import (
    ClusterConfig,
    RunResult,
    _draw_arrivals,
    _initial_belief,
    simulate_cluster,
)
from tracelab.analysis.admission.stage import (
    AdmissionSummary,
    _configs,
    _failure_rate,
    _importance,
    _Runner,
    _tune_all,
    _utilization,
    _with_gains,
    admission_results,
    pilot_chunk,
    run_cluster,
)
from tracelab.analysis.admission.stats import (
    PolicyResult,
    gain_interval,
    policy_result,
    threshold_bounds,
    utilization_ci,
)
from tracelab.analysis.admission.tuning import bisect_threshold
from tracelab.analysis.common.datapaths import PARAMS_EXPORT
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_outputs import read_summary
from tracelab.analysis.export.document import load_params


def _run(
    run: int,
    utilization: float,
    scaleouts: int,
    failures: int,
    *,
    weight: float = 1.0,
    deployments: float = 0.0,
    accepted: int = 0,
    arrivals: int = 0,
) -> RunResult:
    return RunResult(
        run=run,
        utilization=utilization,
        scaleouts=scaleouts,
        failures=failures,
        arrivals=arrivals,
        accepted=accepted,
        core_deaths=0,
        shutdowns=0,
        zero_core_deaths=0,
        mean_deployments=deployments,
        weight=weight,
    )


def test_bisection_stops_when_the_next_step_cannot_change_the_decision() -> None:
    # zeroth: T ∈ [0, 1]; failure rate T²/10 meets an SLA of 0.025 iff T ≤ 0.5; utilization = T
    seen: list[float] = []

    def evaluate(t: float) -> tuple[float, float]:
        seen.append(t)
        return t * t / 10, t

    bracket, steps = bisect_threshold("zeroth", evaluate, sla=0.025, max_steps=20, tolerance=0.1)
    # top 1 (infeasible), 0.5 (feasible: 0.025 ≤ 0.025), 0.75, 0.625, 0.5625 (infeasible):
    # utilization 0.5 vs 0.5625 differ by 0.0625 ≤ 0.1, so a sixth step could move it by less
    assert seen == [1.0, 0.5, 0.75, 0.625, 0.5625]
    assert [s.feasible for s in steps] == [False, True, False, False, False]
    assert (bracket.low, bracket.high, bracket.steps, bracket.settled) == (0.5, 0.5625, 5, True)
    assert (bracket.utilization_low, bracket.utilization_high) == (0.5, 0.5625)
    # capped at three steps the bracket [0.5, 0.75] is still 0.25 wide: not settled
    capped, _ = bisect_threshold("zeroth", evaluate, sla=0.025, max_steps=3, tolerance=0.1)
    assert (capped.low, capped.high, capped.settled) == (0.5, 0.75, False)


def test_bisection_stops_when_the_bracket_only_locates_a_jump() -> None:
    # one more admitted deployment tips the runs into failures at T = 0.3: utilization jumps
    # from 0.3 to 0.9 there, so the utilization rule alone would never stop. Resolution 1/8 of
    # [0, 1]: points 1, 0.5 (infeasible), 0.25 (feasible), 0.375 (infeasible): width 0.125
    def evaluate(t: float) -> tuple[float, float]:
        return (0.0, 0.3) if t <= 0.3 else (1.0, 0.9)

    bracket, steps = bisect_threshold(
        "zeroth", evaluate, sla=0.0, max_steps=20, tolerance=0.01, resolution=1 / 8
    )
    assert [s.point for s in steps] == [1.0, 0.5, 0.25, 0.375]
    assert (bracket.low, bracket.high, bracket.settled) == (0.25, 0.375, True)
    assert (bracket.utilization_low, bracket.utilization_high) == (0.3, 0.9)


def test_bisection_of_the_second_moment_is_on_log10_t() -> None:
    # second: log10 T ∈ [−8, 0]; the failure rate is T itself (SLA 1e-3: feasible iff T ≤ 1e-3),
    # the utilization (log10 T + 8)/8. Points 0, −4, −2, −3, −2.5, −2.75, −2.875, −2.9375: the
    # last bracket [−3, −2.9375] differs in utilization by 0.0625/8 ≈ 0.0078 ≤ 0.01
    bracket, steps = bisect_threshold(
        "second",
        lambda t: (t, (math.log10(t) + 8) / 8),
        sla=1e-3,
        max_steps=40,
        tolerance=0.01,
    )
    assert [s.point for s in steps] == [0, -4, -2, -3, -2.5, -2.75, -2.875, -2.9375]
    assert bracket.threshold_low == pytest.approx(1e-3)
    assert bracket.threshold_high == pytest.approx(10**-2.9375)
    assert steps[3].threshold == pytest.approx(1e-3)
    assert bracket.settled


def test_a_feasible_top_needs_no_bisection() -> None:
    bracket, steps = bisect_threshold(
        "first", lambda t: (0.0, t / 2), sla=0.0, max_steps=10, tolerance=0.0
    )
    assert len(steps) == 1
    assert (bracket.low, bracket.high, bracket.threshold_low, bracket.settled) == (2, 2, 2, True)
    # no infeasible end was evaluated: its utilization is None (the top's is 2 / 2 = 1)
    assert (bracket.utilization_low, bracket.utilization_high) == (1.0, None)


def test_failure_rate_and_utilization_pool_weighted_runs() -> None:
    runs = [_run(0, 0.5, 10, 1, weight=2.0), _run(1, 0.7, 20, 0), _run(2, 0.6, 0, 0)]
    # failures (2·1 + 0 + 0) over scale-outs (2·10 + 20 + 0) = 0.05; utilization (1 + 0.7 + 0.6)/4
    assert _failure_rate(runs) == pytest.approx(0.05)
    assert _utilization(runs) == pytest.approx(0.575)
    assert _failure_rate([_run(0, 0.5, 0, 0)]) == 0.0


def test_policy_result_pools_the_runs_and_states_the_regime() -> None:
    runs = [
        _run(0, 0.5, 10, 1, deployments=100.0, accepted=5, arrivals=50),
        _run(1, 0.7, 20, 0, deployments=200.0, accepted=5, arrivals=50),
        _run(2, 0.6, 0, 0, deployments=300.0, accepted=10, arrivals=100),
    ]
    options = AdmissionParams(bootstrap=200)
    result = policy_result("second", 0, -3.0, runs, 0.05, options)
    assert result.threshold == pytest.approx(1e-3)  # 10^−3: the search point is log10 T
    assert result.failure_rate == pytest.approx(1 / 30)
    assert (result.scaleouts, result.failures, result.runs) == (30, 1, 3)
    assert result.sla_met
    assert result.utilization == pytest.approx(0.6)
    assert result.utilization_ci_low <= 0.6 <= result.utilization_ci_high
    assert result.mean_deployments == pytest.approx(200.0)
    assert (result.accepted, result.arrivals) == (20, 200)
    assert result.accepted_share == pytest.approx(0.1)
    # the stored failure rate: 1 of 30 with the bootstrap interval over runs above
    assert result.failure_rate_interval == {
        "value": pytest.approx(1 / 30),
        "low": result.failure_rate_ci_low,
        "high": result.failure_rate_ci_high,
        "n": 30,
        "level": 0.95,
        "method": "percentile bootstrap resampling runs (failed / all scale-outs)",
        "events": 1,
    }
    # no failure in 30 scale-outs of unweighted runs: the one-sided bound 1 − 0.05^(1/30)
    safe = [dataclasses.replace(r, failures=0) for r in runs]
    bound = policy_result("zeroth", 0, 0.5, safe, 0.01, options).failure_rate_interval
    assert bound is not None
    assert (bound["value"], bound["low"], bound["events"], bound["n"]) == (0.0, 0.0, 0, 30)
    assert bound["high"] == pytest.approx(1 - 0.05 ** (1 / 30))
    # weighted runs (importance sampling) keep the interval over runs even without failures
    weighted = [dataclasses.replace(r, weight=0.5) for r in safe]
    assert (
        policy_result("zeroth", 0, 0.5, weighted, 0.01, options)
        .failure_rate_interval["method"]
        .startswith("percentile bootstrap")
    )
    assert not policy_result("zeroth", 0, 0.5, runs, 0.01, options).sla_met
    assert policy_result("accept-all", 0, 1.0, runs, None, options).sla_met is None


def test_gains_are_relative_to_the_zeroth_moment_policy() -> None:
    options = AdmissionParams(bootstrap=200)
    zeroth = policy_result("zeroth", 0, 0.5, [_run(0, 0.5, 1, 0), _run(1, 0.5, 1, 0)], 1, options)
    second = policy_result("second", 0, -3, [_run(0, 0.6, 1, 0), _run(1, 0.6, 1, 0)], 1, options)
    runs = [[_run(0, 0.6, 1, 0), _run(1, 0.6, 1, 0)], [_run(0, 0.5, 1, 0), _run(1, 0.5, 1, 0)]]
    gained = _with_gains([second, zeroth], runs, options)
    assert gained[0].gain_vs_zeroth == pytest.approx(0.2)  # 0.6 / 0.5 − 1
    assert gained[1].gain_vs_zeroth == pytest.approx(0.0)
    assert _with_gains([second], runs[:1], options)[0].gain_vs_zeroth is None


def test_gain_interval_pairs_each_run_with_the_baselines_run_of_the_same_seeds() -> None:
    """Utilization varies a lot between runs (0.4–0.7) but the policy holds 10% more than the
    zeroth in every run: the paired interval is the point 0.1 itself, while the policies'
    own intervals (over runs) overlap widely. Unpaired (the baseline's runs in another order)
    the same values would give a wide interval around 0.1."""
    options = AdmissionParams(bootstrap=500)
    base = [0.4, 0.7, 0.5, 0.6, 0.45]
    zeroth_runs = [_run(i, u, 100, 0) for i, u in enumerate(base)]
    second_runs = [_run(i, 1.1 * u, 100, 0) for i, u in enumerate(base)]
    zeroth = policy_result("zeroth", 0, 0.5, zeroth_runs, 1, options)
    second = policy_result("second", 0, -3, second_runs, 1, options)
    assert second.utilization_ci_low < zeroth.utilization_ci_high  # the intervals overlap
    gained, _ = _with_gains([second, zeroth], [second_runs, zeroth_runs], options)
    assert gained.gain_vs_zeroth == pytest.approx(0.1)
    assert (gained.gain_ci_low, gained.gain_ci_high) == (pytest.approx(0.1), pytest.approx(0.1))
    shuffled = [_run(i, base[(i + 1) % 5], 100, 0) for i in range(5)]
    low, high = gain_interval(second_runs, shuffled, 500, 0)
    assert low < 0.0 < 0.2 < high
    with pytest.raises(ValueError, match="same runs"):
        gain_interval(second_runs[:4], zeroth_runs, 500, 0)


def test_configurations_cover_table_2_and_figure_1() -> None:
    params = AdmissionParams(policies=("zeroth", "first-marginal"), observations=(0, 5))
    got = [(c.policy, c.observations) for c in _configs(params, PRIORS)]
    # Fig. 1 runs both marginal policies at each k; first-marginal at k = 0 is already in Table 2
    assert got == [
        ("zeroth", 0),
        ("first-marginal", 0),
        ("second-marginal", 0),
        ("first-marginal", 5),
        ("second-marginal", 5),
    ]
    cfg = _configs(params, PRIORS)[0]
    assert (cfg.cores, cfg.horizon_hours, cfg.lookahead_steps) == (
        params.cores,
        params.horizon_hours,
        params.lookahead_steps,
    )


def test_mean_deployments_counts_live_deployments_over_time() -> None:
    # cores that (almost) never die and no scale-outs: every arrival lives to the horizon, so the
    # time-mean count is Σ(H − tᵢ)/H over uniform arrival times: n/2 ± √(n/12)
    immortal = dataclasses.replace(PRIORS, lifetime_rate=1e12, arrival_rate_per_hour=10.0)
    cfg = ClusterConfig(
        priors=immortal, cores=1_000_000, horizon_hours=100.0, policy="accept-all", threshold=1.0
    )
    res = simulate_cluster(cfg, (0, 0, 0), 0)
    assert res.accepted == res.arrivals > 900
    assert (res.core_deaths, res.shutdowns, res.scaleouts) == (0, 0, 0)
    assert abs(res.mean_deployments - res.arrivals / 2) < 4 * math.sqrt(res.arrivals / 12)


def _point(policy: str, threshold: float) -> float:
    return math.log10(threshold) if policy.startswith("second") else threshold


def test_stage_reports_the_bracket_and_the_regime(tmp_path: Path) -> None:
    write_params(tmp_path)
    params = AdmissionParams(
        cores=40,
        arrival_rate=0.0,  # the exported deployment_arrival_rate
        horizon_hours=150.0,
        runs=3,
        sla=0.02,
        policies=("zeroth", "second"),
        observations=(),
        tuning_iterations=12,
        tuning_tolerance=0.01,
        upper_bound=True,
        bootstrap=200,
    )
    out = tmp_path / "out"
    seen: list[tuple[int, int, str]] = []
    summary = admission_results(params, tmp_path, out, progress=lambda *a: seen.append(a))
    # progress counts the runs done, and ends at the total (less the tuning steps not needed)
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
    assert seen[-1][0] == seen[-1][1]
    tuning = pl.read_parquet(out / "tuning.parquet")
    runs = pl.read_parquet(out / "runs.parquet")
    for result in summary.results:
        mine = tuning.filter(pl.col("policy") == result.policy)
        assert result.tuning_steps == mine.height
        assert isinstance(result.tuning_settled, bool)
        feasible = mine.filter(pl.col("feasible"))
        infeasible = mine.filter(~pl.col("feasible"))
        # the tuned T is the largest feasible step, the bracket's top the smallest infeasible one
        if feasible.height:
            assert result.threshold == pytest.approx(feasible["threshold"].max())
        assert result.threshold_high == pytest.approx(infeasible["threshold"].min())
        assert result.bracket_utilization_high == pytest.approx(
            infeasible.sort("threshold")["utilization"][0]
        )
        # settled: the ends' utilizations within the tolerance, or the bracket at the resolution
        if result.tuning_settled and feasible.height:
            gap = result.bracket_utilization_high - result.bracket_utilization_low  # type: ignore[operator]
            lo, hi = threshold_bounds(result.policy)
            width = abs(
                _point(result.policy, result.threshold_high)
                - _point(result.policy, result.threshold)
            )  # type: ignore[arg-type]
            assert (
                gap <= params.tuning_tolerance
                or width <= params.tuning_resolution * (hi - lo) + 1e-12
            )
        verified = runs.filter(pl.col("policy") == result.policy)
        # verification runs at the tuned (feasible) end, not at the bracket's top, numbered
        assert sorted(verified["run"]) == list(range(params.runs))
        assert verified["threshold"].to_list() == pytest.approx([result.threshold] * params.runs)
        assert result.mean_deployments == pytest.approx(verified["mean_deployments"].mean())
        assert result.accepted_share == pytest.approx(
            verified["accepted"].sum() / verified["arrivals"].sum()
        )
    # the upper bound: accept while it fits, no threshold, no SLA, verified on its own runs
    upper = summary.upper_bound
    assert upper is not None
    assert (upper.policy, upper.observations, upper.threshold, upper.sla_met) == (
        "accept-all",
        0,
        1.0,
        None,
    )
    mine = runs.filter(pl.col("policy") == "accept-all")
    assert mine["observations"].to_list() == [0] * params.runs
    assert upper.utilization == pytest.approx(mine["utilization"].mean())
    doc = summary.to_dict()
    # the header as asked: 40 cores, 150 h, 3 runs, SLA 2%, and the exported arrival rate of the
    # helper's document (2 per hour) since the option was 0
    assert (doc["trace"], doc["stage"]) == ("azure-2017", "admission")
    assert (doc["cores"], doc["horizon_hours"], doc["runs"], doc["sla"]) == (40, 150.0, 3, 0.02)
    assert doc["arrival_rate_per_hour"] == 2.0
    assert doc["parameters"]["arrival_rate_per_hour"] == 2.0
    assert doc["parameters"]["arrival_rate"] == 0.0
    assert read_summary(out)["runs"] == 3
    assert doc["records"] == list(summary.records)
    assert len(doc["records"]) > 0
    assert {"mean_deployments", "accepted_share", "threshold_high"} <= set(doc["results"][0])
    assert np.isfinite(doc["results"][0]["mean_deployments"])


def test_memory_estimate_by_hand() -> None:
    params = AdmissionParams(
        runs=2,
        bootstrap=100,
        policies=("zeroth",),
        observations=(1,),
        arrival_rate=10.0,
        horizon_hours=100.0,
        cores=50,
    )
    # configs 1 + 2 · 1 + 1 = 4; rows 2 · 4 · 2,000 = 16,000; bootstrap 2 · 100 · 16 = 3,200;
    # arrivals 10 · 100 · 200 = 200,000; live deployments 50 · 2,000 = 100,000
    assert params.memory_estimate() == (
        319_200,
        "--runs, --bootstrap, --arrival-rate or --horizon-hours",
    )
    pilot = dataclasses.replace(params, importance_sampling=True, is_pilot_runs=1000)
    assert pilot.memory_estimate()[0] == 319_200 + 8_000


def test_importance_pilot_runs_in_chunks_on_its_own_seed_stream() -> None:
    cfg = ClusterConfig(priors=PRIORS, cores=40, horizon_hours=24.0, policy="zeroth", threshold=0.5)
    assert _importance(cfg, AdmissionParams(), lambda f, xs: [f(x) for x in xs]) is None
    bad = AdmissionParams(importance_sampling=True, is_quantiles=(0.8,), is_redraw=(0.5, 0.25))
    with pytest.raises(TracelabError, match="--is-redraw has 2 values"):
        _importance(cfg, bad, lambda f, xs: [f(x) for x in xs])
    sizes: list[int] = []

    def counting_map(fn, items):  # type: ignore[no-untyped-def]
        sizes.extend(len(x) for x in items)
        return [fn(x) for x in items]

    params = AdmissionParams(importance_sampling=True, is_pilot_runs=210, seed=3)
    scheme = _importance(cfg, params, counting_map)
    assert sizes == [100, 100, 10]  # chunks of 100 pilot runs
    # the same scheme as one chunk of the pilot's 210 runs (seed 3, stream 2)
    bm = np.array(pilot_chunk(cfg, 3, tuple(range(210))))
    assert scheme == importance_scheme(bm, params.is_quantiles, params.is_redraw)
    assert scheme is not None
    assert scheme.pilot_runs == 210


def test_stage_runs_the_importance_pilot_through_its_map(tmp_path: Path) -> None:
    write_params(tmp_path)
    params = AdmissionParams(
        cores=40,
        horizon_hours=24.0,
        runs=2,
        policies=("zeroth",),
        observations=(),
        tuning_iterations=1,
        upper_bound=False,
        bootstrap=100,
        importance_sampling=True,
        is_pilot_runs=10,
    )
    mapped: list[int] = []

    def counting_map(fn, items):  # type: ignore[no-untyped-def]
        mapped.append(len(items))
        return [fn(x) for x in items]

    summary = admission_results(params, tmp_path, tmp_path / "out", map_fn=counting_map)
    # the pilot (one chunk of 10 runs) goes through the stage's map like every run batch:
    # then one tuning step and the verification, 2 runs each
    assert mapped == [1, 2, 2]
    assert summary.importance_sampling
    assert summary.importance is not None
    assert summary.importance.pilot_runs == 10


def test_prior_observations_let_the_marginal_policies_admit_more_on_the_same_arrivals() -> None:
    """§6, Fig. 1: k prior observations of a deployment's own lifetimes, gaps and sizes sharpen
    the provider's belief, so the marginal heuristic recognises the deployments that will soon be
    gone (expected below one core at a step) and admits them. The arrivals are drawn whatever k
    is (same seeds, same deployments), so at a fixed T only the belief differs: with 50
    observations more deployments are accepted than with none; with k = 0 the Fig. 1
    configuration decides exactly as the Table 2 one."""
    params = AdmissionParams(
        cores=40,
        horizon_hours=300.0,
        policies=("first-marginal",),
        observations=(0, 50),
        lookahead_steps=4,
    )
    configs = {(c.policy, c.observations): c for c in _configs(params, PRIORS)}

    def runs(policy: str, k: int) -> list[RunResult]:
        cfg = dataclasses.replace(configs[policy, k], threshold=0.6)
        return [run_cluster(cfg, 0, 0, r) for r in range(3)]

    for policy in ("first-marginal", "second-marginal"):
        blind, informed = runs(policy, 0), runs(policy, 50)
        assert [r.arrivals for r in blind] == [r.arrivals for r in informed]
        assert sum(r.accepted for r in informed) > sum(r.accepted for r in blind), policy
    table2 = dataclasses.replace(
        _configs(dataclasses.replace(params, observations=()), PRIORS)[0], threshold=0.6
    )
    assert [run_cluster(table2, 0, 0, r) for r in range(3)] == runs("first-marginal", 0)


def test_prior_observations_move_each_belief_to_the_deployments_own_parameters() -> None:
    """§6: with k observations the belief absorbs k of the deployment's true core lifetimes,
    scale-out gaps and batch sizes, so each Gamma's mean estimates that deployment's own λ, ρ
    and s from about k draws: relative error ~1/√k (0.14 at k = 50, a median |log error| near
    0.1), where the prior alone misses by its own spread (λ ~ Gamma(3, ·): ~0.4)."""
    params = AdmissionParams(cores=40, horizon_hours=300.0, observations=(0, 50))
    configs = {(c.policy, c.observations): c for c in _configs(params, PRIORS)}

    def median_log_errors(k: int) -> dict[str, float]:
        cfg = configs["first-marginal", k]
        arr = _draw_arrivals(cfg, (0, 0, 0))
        rho = arr.rate / arr.lam**PRIORS.alpha
        errors: dict[str, list[float]] = {"lambda": [], "rho": [], "s": []}
        for i in range(len(arr.times)):
            b = _initial_belief(cfg, arr, i, float(arr.times[i]))
            errors["lambda"].append(abs(math.log(b.a_lam / b.b_lam / arr.lam[i])))
            errors["rho"].append(abs(math.log(b.a_rho / b.b_rho / rho[i])))
            errors["s"].append(abs(math.log(b.a_s / b.b_s / arr.size[i])))
        return {name: float(np.median(e)) for name, e in errors.items()}

    informed, blind = median_log_errors(50), median_log_errors(0)
    for name in ("lambda", "rho", "s"):
        assert informed[name] < 0.25, (name, informed)
        assert blind[name] > 2 * informed[name], (name, blind, informed)


def test_configurations_carry_every_simulation_option() -> None:
    """Each option the simulator reads reaches every configuration, at values none of the
    defaults has (C 40, 150 h, look-ahead 24 h and 100 h in 3 steps, marginal below 2.5 cores)."""
    params = AdmissionParams(
        cores=40,
        horizon_hours=150.0,
        lookahead_hours=(100.0, 24.0),
        lookahead_steps=3,
        marginal_cores=2.5,
        policies=("zeroth", "second"),
        observations=(5,),
    )
    configs = _configs(params, PRIORS)
    assert len(configs) == 4
    for cfg in configs:
        assert (cfg.cores, cfg.horizon_hours) == (40, 150.0)
        assert (cfg.lookahead_hours, cfg.lookahead_steps) == ((100.0, 24.0), 3)
        assert cfg.marginal_cores == 2.5
        assert cfg.priors is PRIORS


def test_stage_judges_the_given_sla_and_runs_on_the_given_seed(tmp_path: Path) -> None:
    """A tuning step is feasible exactly when its pooled failure rate is within the SLA asked
    (0.1 here, not the default 1e-3), the verdict of each policy likewise; the upper bound's
    verification runs are the simulator's runs of seed 7 (stream 1 = verification)."""
    write_params(tmp_path)
    params = AdmissionParams(
        cores=40,
        arrival_rate=0.0,
        horizon_hours=100.0,
        runs=2,
        sla=0.1,
        policies=("zeroth",),
        tuning_iterations=4,
        bootstrap=200,
        seed=7,
    )
    summary = admission_results(params, tmp_path, tmp_path / "out")
    tuning = pl.read_parquet(tmp_path / "out" / "tuning.parquet")
    assert tuning["feasible"].to_list() == [f <= 0.1 for f in tuning["failure_rate"]]
    # the check has power: a step feasible at 0.1 would not be at the default 1e-3
    assert tuning.filter(pl.col("feasible") & (pl.col("failure_rate") > 1e-3)).height > 0
    for result in summary.results:
        assert result.sla_met == (result.failure_rate <= 0.1)
    runs = pl.read_parquet(tmp_path / "out" / "runs.parquet").filter(
        pl.col("policy") == "accept-all"
    )
    priors = admission_priors(load_params(PARAMS_EXPORT.path(tmp_path)), "marginal", None)
    upper = dataclasses.replace(_configs(params, priors)[0], policy="accept-all", threshold=1.0)
    expected = [run_cluster(upper, 7, 1, r).utilization for r in range(params.runs)]
    assert runs["utilization"].to_list() == pytest.approx(expected)


@pytest.mark.parametrize(("tolerance", "resolution"), [(0.05, 0.001), (1e-4, 0.1)])
def test_tuning_stops_where_the_asked_tolerance_and_resolution_say(
    tolerance: float, resolution: float
) -> None:
    """_tune_all bisects with the stage's SLA, step limit, tolerance and resolution: on a
    made-up curve (utilization 0.8·T; failure rate 0.01·(T − 0.5) above T = 0.5, so the SLA 1e-3
    is crossed at T = 0.6) its steps are bisect_threshold's with the same options. Either rule
    alone stops once the bracket is 1/16 wide: tolerance 0.05 (utilizations 0.05 apart) or
    resolution 0.1 (narrower than a tenth of [0, 1]); the other is set not to bite, and the
    defaults (0.002, 1/64) would go on."""

    def curve(threshold: float) -> tuple[int, float]:
        return round(1e6 * 0.01 * max(threshold - 0.5, 0.0)), 0.8 * threshold

    def fake_map(fn, tasks):  # type: ignore[no-untyped-def]
        return [
            _run(run, curve(cfg.threshold)[1], 1_000_000, curve(cfg.threshold)[0])
            for cfg, _, run in tasks
        ]

    params = AdmissionParams(
        runs=2,
        sla=1e-3,
        tuning_iterations=12,
        tuning_tolerance=tolerance,
        tuning_resolution=resolution,
    )
    base = _configs(dataclasses.replace(params, policies=("zeroth",)), PRIORS)[0]
    runner = _Runner(fake_map, lambda *_: None, 100, 0)
    rows: list[dict[str, object]] = []
    [bracket] = _tune_all([base], params, runner, rows)

    def evaluate(threshold: float) -> tuple[float, float]:
        failures, utilization = curve(threshold)
        return failures / 1_000_000, utilization

    expected, steps = bisect_threshold(
        "zeroth", evaluate, sla=1e-3, max_steps=12, tolerance=tolerance, resolution=resolution
    )
    assert [r["threshold"] for r in rows] == [s.threshold for s in steps]
    assert [r["threshold"] for r in rows] == [1.0, 0.5, 0.75, 0.625, 0.5625]
    assert (bracket.threshold_low, bracket.threshold_high) == (0.5625, 0.625)
    assert bracket == expected


def test_tuning_rounds_batch_every_unsettled_policy_and_keep_each_ones_steps() -> None:
    """All policies' bisections advance together, each round's runs in one map call, and each
    policy's steps are those of its bisection alone. Failure rate (T − 0.5)/100 above T = 0.5
    for every policy, SLA 1e-3 (crossed at T = 0.6), utilization 0.8·T, resolution 1/16 only:
    zeroth on [0, 1] stops at a bracket 1/16 wide after 1, 0.5, 0.75, 0.625, 0.5625 (5 steps);
    first on [0, 2] needs a bracket 1/8 wide: 2, 1, 0.5, 0.75, 0.625 (5 steps); second on
    log10 T ∈ [−8, 0] is feasible at 10^-8 … 10^-0.5 and infeasible at 1: 0, −4, −2, −1, −0.5
    (bracket 1/16 of 8 = 0.5 wide after 5 steps). So 5 rounds of 3 policies × 2 runs."""

    def rate(threshold: float) -> float:
        return max(threshold - 0.5, 0.0) / 100

    calls: list[list[tuple[str, float]]] = []

    def fake_map(fn, tasks):  # type: ignore[no-untyped-def]
        calls.append([(cfg.policy, cfg.threshold) for cfg, _, _ in tasks])
        return [
            _run(run, 0.8 * cfg.threshold, 1_000_000, round(1e6 * rate(cfg.threshold)))
            for cfg, _, run in tasks
        ]

    params = AdmissionParams(
        runs=2, sla=1e-3, tuning_iterations=12, tuning_tolerance=0.0, tuning_resolution=1 / 16
    )
    configs = _configs(params, PRIORS)
    rows: list[dict[str, object]] = []
    brackets = _tune_all(configs, params, _Runner(fake_map, lambda *_: None, 100, 0), rows)
    assert [len(c) for c in calls] == [6] * 5
    assert {p for p, _ in calls[0]} == {"zeroth", "first", "second"}
    for cfg, bracket in zip(configs, brackets, strict=True):
        alone, steps = bisect_threshold(
            cfg.policy,
            lambda t: (rate(t), 0.8 * t),
            sla=1e-3,
            max_steps=12,
            tolerance=0.0,
            resolution=1 / 16,
        )
        assert bracket == alone
        mine = [r["threshold"] for r in rows if r["policy"] == cfg.policy]
        assert mine == [s.threshold for s in steps]
    assert [r["threshold"] for r in rows if r["policy"] == "first"] == [2.0, 1.0, 0.5, 0.75, 0.625]
    second = [r["threshold"] for r in rows if r["policy"] == "second"]
    assert second == pytest.approx([1.0, 1e-4, 1e-2, 1e-1, 10**-0.5])
    # rows come configuration by configuration, as the table is read
    assert [r["policy"] for r in rows] == ["zeroth"] * 5 + ["first"] * 5 + ["second"] * 5


def test_intervals_resample_as_often_as_asked_from_the_seed_asked() -> None:
    """The BCa interval of the utilization is a bootstrap: the same resamples (count and seed)
    give the same interval, another seed or count another one."""
    rng = np.random.default_rng(5)
    runs = [
        _run(i, float(u), 100, int(f))
        for i, (u, f) in enumerate(
            zip(rng.uniform(0.5, 0.8, 12), rng.integers(0, 4, 12), strict=True)
        )
    ]

    def interval(bootstrap: int, seed: int) -> tuple[float, float]:
        r = policy_result(
            "zeroth", 0, 0.5, runs, 0.01, AdmissionParams(bootstrap=bootstrap, seed=seed)
        )
        return r.utilization_ci_low, r.utilization_ci_high

    assert interval(300, 1) == interval(300, 1)
    assert interval(300, 1) != interval(300, 2)
    assert interval(300, 1) != interval(600, 1)


def test_utilization_interval_of_too_few_or_equal_runs_is_the_point() -> None:
    # two runs (0.4 and 0.6), or three equal ones: no bootstrap, the interval is the mean
    assert utilization_ci(np.array([0.4, 0.6]), 100, 0) == pytest.approx((0.5, 0.5))
    assert utilization_ci(np.array([0.5, 0.5, 0.5]), 100, 0) == (0.5, 0.5)
    # weighted 3 : 1, (3 · 0.4 + 0.6) / 4 = 0.45
    two = utilization_ci(np.array([0.4, 0.6]), 100, 0, np.array([3.0, 1.0]))
    assert two == pytest.approx((0.45, 0.45))
    # three distinct runs are bootstrapped: an interval around their mean 0.5
    low, high = utilization_ci(np.array([0.4, 0.5, 0.6]), 200, 0)
    assert low < 0.5 < high


def test_utilization_interval_falls_back_to_the_percentile_bootstrap() -> None:
    # importance weights 1, 1, 0 (a bucket the pilot never reached has P = 0): the weighted mean
    # of (0, 0, 1) is 0 on every resample with weight, 0/0 on the others, so BCa has no
    # interval; the percentile bootstrap of Σ u·w / Σ w counts 0/0 as 0: (0, 0)
    values, weights = np.array([0.0, 0.0, 1.0]), np.array([1.0, 1.0, 0.0])
    assert utilization_ci(values, 100, 0, weights) == (0.0, 0.0)


def _verified(
    policy: str, utilization: float, met: bool | None, observations: int = 0
) -> PolicyResult:
    """A verified result with only what the headline reads set by hand."""
    base = policy_result("zeroth", 0, 0.5, [_run(0, 0.5, 10, 0)], None, AdmissionParams())
    return dataclasses.replace(
        base, policy=policy, utilization=utilization, sla_met=met, observations=observations
    )


def test_the_headline_is_the_best_table_2_policy_meeting_the_sla_with_its_case() -> None:
    """Of zeroth 0.70 (met), first 0.75 (met), second 0.80 (missed) and a Fig. 1 policy 0.9
    (observations, not Table 2), the first-moment policy leads; with none met, the highest."""
    summary = AdmissionSummary(
        prior="marginal",
        records=(),
        cores=3000,
        arrival_rate_per_hour=8.0,
        horizon_hours=168.0,
        runs=3,
        sla=0.001,
        results=(
            _verified("zeroth", 0.70, True),
            _verified("first", 0.75, True),
            _verified("second", 0.80, False),
            _verified("second", 0.90, True, observations=5),
        ),
        upper_bound=None,
        importance_sampling=False,
        params=AdmissionParams(),
    )
    case = "failure rate ≤ 0.001 on 3 verification runs; 3,000 cores, 168 h, marginal prior"
    assert summary.to_dict()["headline"] == {
        "key": "best_utilization",
        "condition": f"first policy, best of those with {case}",
    }
    none_met = dataclasses.replace(
        summary, results=(_verified("zeroth", 0.7, False), _verified("first", 0.75, False))
    )
    assert none_met.headline() == {
        "key": "top_utilization",
        "condition": f"first policy; none met the SLA ({case})",
    }
    assert dataclasses.replace(summary, results=()).headline()["key"] == "best_utilization"
