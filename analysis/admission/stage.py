"""Cluster admission control on the exported Gamma priors (Cluster Admission §2–6, docs/methods.md §3.2).

``admission_results`` reads only ``DATA/exports/params.json`` (through :func:`load_params`),
tunes each policy's threshold by binary search to meet the SLA on the scale-out failure rate,
verifies the tuned threshold on fresh seeds, and writes the stage's tables and ``summary.json``.
The model and its closed-form moments are in ``admission_model.py``, the incremental moment sums in
``admission_moments.py``, the event-driven cluster in ``admission_sim.py``.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelab.analysis.admission.drift import SizeDrift, size_drift
from tracelab.analysis.admission.importance import ImportanceSampling, importance_scheme
from tracelab.analysis.admission.model import AdmissionPriors, admission_priors
from tracelab.analysis.admission.options import (
    STAGE,
    TRACE,
    AdmissionParams,
)
from tracelab.analysis.admission.sim import (
    ClusterConfig,
    RunResult,
    pilot_badness,
    simulate_cluster,
)
from tracelab.analysis.admission.stats import PolicyResult, gain_interval, policy_result
from tracelab.analysis.admission.tuning import Bisection, Bracket
from tracelab.analysis.common.datapaths import PARAMS_EXPORT
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import (
    MapFn,
    Progress,
    memory_problem,
    no_progress,
    serial_map,
)
from tracelab.analysis.common.stage_outputs import HEADLINE, headline, write_stage_outputs
from tracelab.analysis.export.document import load_params

#: the policies of Fig. 1, run once per entry of ``observations``
FIGURE1_POLICIES = ("first-marginal", "second-marginal")
#: seed streams: tuning runs, verification runs and the App. D pilot never share a seed
_TUNE, _VERIFY, _PILOT = 0, 1, 2
#: pilot runs per map task (one BM takes ~10 ms: tasks of one run would be all overhead)
_PILOT_CHUNK = 100


@dataclass(frozen=True)
class AdmissionSummary:
    """Headline numbers: per policy the tuned threshold, utilization (BCa 95% CI), failure rate."""

    prior: str
    records: tuple[str, ...]
    cores: int
    arrival_rate_per_hour: float
    horizon_hours: float
    runs: int
    sla: float
    results: tuple[PolicyResult, ...]
    upper_bound: PolicyResult | None
    importance_sampling: bool
    params: AdmissionParams
    importance: ImportanceSampling | None = None
    #: what the priors predict for a deployment's size over the look-ahead (``drift.py``)
    drift: SizeDrift | None = None

    def headline(self) -> dict[str, str]:
        """The utilization the page leads with: the best Table 2 policy (no observations)
        among those that met the SLA on the verification seeds, or, when none did, the
        highest, each with the case it was chosen in."""
        table2 = [r for r in self.results if r.observations == 0]
        met = [r for r in table2 if r.sla_met]
        case = (
            f"failure rate ≤ {self.sla:g} on {self.runs} verification runs; {self.cores:,} "
            f"cores, {self.horizon_hours:g} h, {self.prior} prior"
        )
        if met:
            best = max(met, key=lambda r: r.utilization)
            return headline("best_utilization", f"{best.policy} policy, best of those with {case}")
        if not table2:
            return headline("best_utilization", f"no policy was verified ({case})")
        top = max(table2, key=lambda r: r.utilization)
        return headline("top_utilization", f"{top.policy} policy; none met the SLA ({case})")

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace": TRACE,
            "stage": STAGE,
            "prior": self.prior,
            "records": list(self.records),
            "cores": self.cores,
            "arrival_rate_per_hour": self.arrival_rate_per_hour,
            "horizon_hours": self.horizon_hours,
            "runs": self.runs,
            "sla": self.sla,
            "results": [r.to_dict() for r in self.results],
            "upper_bound": None if self.upper_bound is None else self.upper_bound.to_dict(),
            "importance_sampling": self.importance_sampling,
            "importance": None if self.importance is None else self.importance.to_dict(),
            "drift": None if self.drift is None else self.drift.to_dict(),
            HEADLINE: self.headline(),
            # the options, and what the stage derived from them and the params document
            "parameters": asdict(self.params)
            | {"arrival_rate_per_hour": self.arrival_rate_per_hour, "records": list(self.records)},
        }


def run_cluster(cfg: ClusterConfig, seed: int, stream: int, run: int) -> RunResult:
    """One run (module level so a Dask worker can unpickle it); seeded by (seed, stream, run)."""
    return simulate_cluster(cfg, (seed, stream, run), run)


def run_task(seed: int, task: tuple[ClusterConfig, int, int]) -> RunResult:
    """:func:`run_cluster` of one ``(config, stream, run)`` item of a batch."""
    return run_cluster(task[0], seed, task[1], task[2])


class _Runner:
    """Runs batches through ``map_fn`` and counts them for ``progress``."""

    def __init__(self, map_fn: MapFn, progress: Progress, total: int, seed: int) -> None:
        self.map_fn = map_fn
        self.progress = progress
        self.total = total
        self.done = 0
        self.seed = seed

    def batch(self, cfgs: list[ClusterConfig], stream: int, n: int) -> list[list[RunResult]]:
        """Runs ``0 .. n-1`` of every configuration in one ``map_fn`` call (so workers are
        busy with all of them at once); a run's seed depends on (seed, stream, run) only, so
        the results are those of one call per configuration, in any order."""
        tasks = [(cfg, stream, run) for cfg in cfgs for run in range(n)]
        out: list[RunResult] = self.map_fn(functools.partial(run_task, self.seed), tasks)
        self.done += len(tasks)
        self.progress(self.done, self.total, "runs")
        return [out[i * n : (i + 1) * n] for i in range(len(cfgs))]


def pilot_chunk(cfg: ClusterConfig, seed: int, runs: tuple[int, ...]) -> list[float]:
    """Badness measures of nominal pilot runs (module level, for Dask)."""
    return [pilot_badness(cfg, (seed, _PILOT, r)) for r in runs]


def _importance(
    cfg: ClusterConfig, params: AdmissionParams, map_fn: MapFn
) -> ImportanceSampling | None:
    """App. D's scheme: bucket bounds and P(bucket) from a pilot of BM values (stream 2)."""
    if not params.importance_sampling:
        return None
    if len(params.is_redraw) != len(params.is_quantiles):
        raise TracelabError(
            f"--is-redraw has {len(params.is_redraw)} values, --is-quantiles "
            f"{len(params.is_quantiles)}: one redraw probability per bucket below the top one"
        )
    runs = range(params.is_pilot_runs)
    chunks = [tuple(runs[i : i + _PILOT_CHUNK]) for i in range(0, len(runs), _PILOT_CHUNK)]
    fn = functools.partial(pilot_chunk, cfg, params.seed)
    bm = np.array([b for chunk in map_fn(fn, chunks) for b in chunk], dtype=np.float64)
    return importance_scheme(bm, params.is_quantiles, params.is_redraw)


def _failure_rate(results: list[RunResult]) -> float:
    """Pooled failed / requested scale-outs, each run weighted (App. D; weight 1 without it)."""
    scaleouts = sum(r.weight * r.scaleouts for r in results)
    return sum(r.weight * r.failures for r in results) / scaleouts if scaleouts else 0.0


def _utilization(results: list[RunResult]) -> float:
    total = sum(r.weight for r in results)
    return sum(r.weight * r.utilization for r in results) / total


def _tune_all(
    configs: list[ClusterConfig],
    params: AdmissionParams,
    runner: _Runner,
    rows: list[dict[str, Any]],
) -> list[Bracket]:
    """Every configuration's tuning bracket on the tuning seeds (``tuning.py``), advanced in
    rounds: each round evaluates the next threshold of every unsettled bisection in one batch.
    One row per step, configuration by configuration."""
    bisections = [
        Bisection(
            c.policy,
            sla=params.sla,
            max_steps=params.tuning_iterations,
            tolerance=params.tuning_tolerance,
            resolution=params.tuning_resolution,
        )
        for c in configs
    ]
    while active := [i for i, b in enumerate(bisections) if not b.done]:
        cfgs = [replace(configs[i], threshold=bisections[i].threshold) for i in active]
        for i, res in zip(active, runner.batch(cfgs, _TUNE, params.runs), strict=True):
            b = bisections[i]
            b.record(_failure_rate(res), _utilization(res))
            if b.done:
                # the total assumed every bisection step: one that settled early needs fewer
                runner.total -= params.runs * (params.tuning_iterations - len(b.steps))
    rows += [
        {
            "policy": c.policy,
            "observations": c.observations,
            "iteration": st.step,
            "threshold": st.threshold,
            "failure_rate": st.failure_rate,
            "utilization": st.utilization,
            "feasible": st.feasible,
        }
        for c, b in zip(configs, bisections, strict=True)
        for st in b.steps
    ]
    return [b.bracket() for b in bisections]


def _run_rows(
    policy: str, observations: int, threshold: float, res: list[RunResult]
) -> list[dict[str, Any]]:
    return [
        {"policy": policy, "observations": observations, "threshold": threshold, **asdict(r)}
        for r in res
    ]


def _configs(params: AdmissionParams, priors: AdmissionPriors) -> list[ClusterConfig]:
    base = ClusterConfig(
        priors=priors,
        cores=params.cores,
        horizon_hours=params.horizon_hours,
        policy="zeroth",
        threshold=0.0,
        lookahead_hours=params.lookahead_hours,
        lookahead_steps=params.lookahead_steps,
        marginal_cores=params.marginal_cores,
    )
    out = [replace(base, policy=p) for p in params.policies]
    out += [
        replace(base, policy=p, observations=k)
        for k in params.observations
        for p in FIGURE1_POLICIES
        if (p, k) not in {(c.policy, c.observations) for c in out}
    ]
    return out


def _tables(
    results: list[PolicyResult], tuning: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> dict[str, pl.DataFrame]:
    return {
        "policies": pl.DataFrame([r.to_dict() for r in results]),
        "tuning": pl.DataFrame(tuning, schema_overrides={"feasible": pl.Boolean}),
        "runs": pl.DataFrame(runs),
    }


def admission_results(
    params: AdmissionParams,
    data_dir: Path,
    out_dir: Path,
    *,
    progress: Progress = no_progress,
    map_fn: MapFn = serial_map,
) -> AdmissionSummary:
    """Tune and verify every policy, run the upper bound, write the tables and summary.json."""
    doc = load_params(PARAMS_EXPORT.path(data_dir))
    priors = admission_priors(doc, params.prior, params.arrival_rate or None)
    # the exported arrival rate is known only now: the memory check again, with it
    problem = memory_problem(replace(params, arrival_rate=priors.arrival_rate_per_hour))
    if problem is not None:
        raise TracelabError(problem)
    configs = _configs(params, priors)
    importance = _importance(configs[0], params, map_fn)
    configs = [replace(c, importance=importance) for c in configs]
    total = params.runs * (len(configs) * (params.tuning_iterations + 1) + params.upper_bound)
    runner = _Runner(map_fn, progress, total, params.seed)
    tuning: list[dict[str, Any]] = []
    run_rows: list[dict[str, Any]] = []
    results: list[PolicyResult] = []
    brackets = _tune_all(configs, params, runner, tuning)
    verify = [replace(c, threshold=b.threshold_low) for c, b in zip(configs, brackets, strict=True)]
    if params.upper_bound:
        verify.append(replace(configs[0], policy="accept-all", observations=0, threshold=1.0))
    verified = runner.batch(verify, _VERIFY, params.runs)
    for cfg, bracket, res in zip(verify, brackets, verified, strict=False):
        run_rows += _run_rows(cfg.policy, cfg.observations, cfg.threshold, res)
        result = policy_result(cfg.policy, cfg.observations, bracket.low, res, params.sla, params)
        results.append(_with_bracket(result, bracket))
    upper = None
    if params.upper_bound:
        run_rows += _run_rows("accept-all", 0, 1.0, verified[-1])
        upper = policy_result("accept-all", 0, 1.0, verified[-1], None, params)
    results = _with_gains(results, verified, params)
    summary = AdmissionSummary(
        prior=params.prior,
        records=priors.records,
        cores=params.cores,
        arrival_rate_per_hour=priors.arrival_rate_per_hour,
        horizon_hours=params.horizon_hours,
        runs=params.runs,
        sla=params.sla,
        results=tuple(results),
        upper_bound=upper,
        importance_sampling=importance is not None,
        params=params,
        importance=importance,
        drift=_drift(priors, params),
    )
    write_stage_outputs(out_dir, _tables(results, tuning, run_rows), summary.to_dict())
    return summary


def _drift(priors: AdmissionPriors, params: AdmissionParams) -> SizeDrift:
    """The look-ahead drift of a one-core arrival and of one of the mean initial size 1 + E[s]."""
    mean_size = 1 + round(priors.size_shape / priors.size_rate)
    sizes = tuple(sorted({1, mean_size}))
    return size_drift(priors, params.lookahead_hours, params.lookahead_steps, sizes)


def _with_bracket(result: PolicyResult, bracket: Bracket) -> PolicyResult:
    return replace(
        result,
        threshold_high=bracket.threshold_high,
        bracket_utilization_low=bracket.utilization_low,
        bracket_utilization_high=bracket.utilization_high,
        tuning_steps=bracket.steps,
        tuning_settled=bracket.settled,
    )


def _with_gains(
    results: list[PolicyResult],
    runs: list[list[RunResult]],
    options: AdmissionParams,
) -> list[PolicyResult]:
    """Relative utilization gain over the zeroth-moment baseline (Cluster Admission §5.3), with
    its paired interval over the verification runs (``runs[i]`` are ``results[i]``'s)."""
    base = next((i for i, r in enumerate(results) if r.policy == "zeroth"), None)
    if base is None or results[base].utilization <= 0:
        return results
    out = []
    for r, res in zip(results, runs, strict=False):
        low, high = gain_interval(res, runs[base], options.bootstrap, options.seed)
        gain = r.utilization / results[base].utilization - 1.0
        out.append(replace(r, gain_vs_zeroth=gain, gain_ci_low=low, gain_ci_high=high))
    return out
