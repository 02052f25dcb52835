"""Benchmark the admission stage: moment-policy speed, incremental vs naive, and Table 2 with tuning.

Run by hand (never in tests)::

    .venv/bin/python bench/admission.py --quick            # a few minutes on 2 cores
    .venv/bin/python bench/admission.py                    # + Table 2 at the reduced configuration
    .venv/bin/python bench/admission.py --workers 2        # Table 2 runs on a local Dask cluster
    .venv/bin/python bench/admission.py --dask-address tcp://host:8786
    .venv/bin/python bench/admission.py --params /elsewhere/exports/params.json

The priors are always those of a params export (default ``DATA/exports/params.json``, DATA from
``$TRACELAB_DATA`` or ``./data``: what ``tracelab run`` wrote), never numbers written here.

Part 1 simulates the second-moment policy (Cluster Admission §5.2 sub-policies, ``--steps`` per horizon,
600 in the paper) twice on the same seeds: with the moment sums kept incrementally and with every
deployment's moments recomputed at each arrival. Both must make the same decisions; the CPU-time
ratio is ``naive_ratio``. Part 2 (not with ``--quick``) runs ``admission_results`` at the issue's
reduced configuration (``PAPER_ADMISSION_PARAMS``: Table 2 and Fig. 1 at the default regime,
10 runs of 30 days per threshold, 60 steps per look-ahead horizon, tuning included).
The last line is ``RESULT cluster_years_per_cpu_s=... naive_ratio=...``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from tracelab.analysis.admission.model import admission_priors
from tracelab.analysis.admission.options import PAPER_ADMISSION_PARAMS, AdmissionParams
from tracelab.analysis.admission.sim import ClusterConfig, simulate_cluster
from tracelab.analysis.admission.stage import (
    AdmissionSummary,
    admission_results,
)
from tracelab.analysis.common.parallel import process_map
from tracelab.analysis.common.stage_api import MapFn
from tracelab.analysis.export.document import load_params

#: the code whose speed this benchmark measures: `make bench-check` lists every row of
#: docs/benchmarks.md measured before the last change to these files
MEASURES = ("analysis/admission",)

HOURS_PER_YEAR = 8760.0
#: the paper's regime (Cluster Admission §5.2): Table 2 over the paper's 3-year runs, in the
#: reduced benchmark's cluster (C = 3,000, 8 arrivals/h), 60 steps per look-ahead horizon, no
#: Fig. 1; RUNS_IN_REGIME runs per threshold: one round of the three policies costs ~30 CPU-s
#: per 3-year run, so 6 runs over ~9 rounds fit 30 minutes on the 2-core machine
RUNS_IN_REGIME = 6
REGIME_PARAMS = dataclasses.replace(
    PAPER_ADMISSION_PARAMS, horizon_hours=3 * HOURS_PER_YEAR, runs=RUNS_IN_REGIME, observations=()
)


def _params_path(arg: str | None) -> Path:
    """The export the stage itself would read; a clear message when there is none."""
    path = (
        Path(arg)
        if arg
        else Path(os.environ.get("TRACELAB_DATA", "data")) / "exports" / "params.json"
    )
    if not path.is_file():
        sys.exit(f"{path}: no params export; run `tracelab run` (or pass --params FILE) first")
    return path


def moment_speed(
    params_json: Path, cores: int, hours: float, runs: int, steps: int
) -> tuple[float, float, float]:
    """(cluster-years per CPU-second incremental, naive CPU s, incremental CPU s)."""
    priors = admission_priors(load_params(params_json), "marginal")
    cfg = ClusterConfig(priors, cores, hours, "second", 0.01, lookahead_steps=steps)
    timings: dict[bool, float] = {}
    results: dict[bool, list[Any]] = {}
    for naive in (False, True):
        c = dataclasses.replace(cfg, naive_moments=naive)
        start = time.process_time()
        results[naive] = [simulate_cluster(c, (7, 0, i), i) for i in range(runs)]
        timings[naive] = time.process_time() - start
        print(f"  {'naive' if naive else 'incremental'}: {timings[naive]:.1f} CPU s", flush=True)
    if results[False] != results[True]:
        print("  WARNING: naive and incremental runs differ", flush=True)
    years = runs * hours / HOURS_PER_YEAR
    return years / timings[False], timings[True], timings[False]


def _worker_cpu(client: Any) -> float:
    """CPU seconds used so far by all worker processes (the runs' CPU time under Dask)."""
    return float(sum(client.run(time.process_time).values()))


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the pool's workers, once it closed)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def _map_fn(args: argparse.Namespace) -> Iterator[tuple[MapFn, Callable[[], float]]]:
    """The stage's map (an existing Dask cluster, or ``--workers`` local processes) and a
    function giving the CPU seconds the Dask workers used so far (0 for local processes:
    they count as this process's children once they exit)."""
    if not args.dask_address:
        with process_map(args.workers) as run:
            yield run, lambda: 0.0
        return
    from distributed import Client

    with Client(args.dask_address) as client:

        def run_on_dask(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
            return list(client.gather(client.map(fn, list(items), pure=False)))

        yield run_on_dask, lambda: _worker_cpu(client)


def table2(
    params_json: Path, params: AdmissionParams, args: argparse.Namespace
) -> tuple[AdmissionSummary, float, float]:
    """(summary, wall seconds, CPU seconds of this process and its workers) of Table 2 with
    tuning; the stage's tables go to ``--out`` (a temporary folder without it)."""
    data = params_json.parent.parent
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="admission-bench-"))
    start = time.perf_counter()
    start_cpu = time.process_time()
    start_children = _children_cpu()
    with _map_fn(args) as (map_fn, dask_cpu):
        start_dask = dask_cpu()
        summary = admission_results(
            params,
            data,
            out,
            progress=lambda d, t, _: print(f"  {d}/{t} runs", flush=True),
            map_fn=map_fn,
        )
        workers = dask_cpu() - start_dask
    # a pool's workers count once they have exited, at the end of the block
    workers += _children_cpu() - start_children
    cpu = time.process_time() - start_cpu + workers
    wall = time.perf_counter() - start
    _print_table(summary)
    print(f"  tables in {out}")
    return summary, wall, cpu


def _print_table(summary: AdmissionSummary) -> None:
    for r in summary.results:
        gain = "" if r.gain_vs_zeroth is None else f" gain={r.gain_vs_zeroth:+.4f}"
        print(
            f"  {r.policy:16s} obs={r.observations} T={r.threshold:.4g} util={r.utilization:.4f} "
            f"[{r.utilization_ci_low:.4f}, {r.utilization_ci_high:.4f}] fail={r.failure_rate:.2e}"
            f" [{r.failure_rate_ci_low:.2e}, {r.failure_rate_ci_high:.2e}] T<{r.threshold_high}"
            f" steps={r.tuning_steps} settled={r.tuning_settled}"
            f" deployments={r.mean_deployments:.1f} accepted={r.accepted_share:.3f}{gain}"
        )
    u = summary.upper_bound
    if u is not None:
        print(
            f"  no-SLA upper bound util={u.utilization:.4f} [{u.utilization_ci_low:.4f}, "
            f"{u.utilization_ci_high:.4f}] fail={u.failure_rate:.2e} "
            f"deployments={u.mean_deployments:.1f} accepted={u.accepted_share:.3f}"
        )


def _reduced(args: argparse.Namespace, base: AdmissionParams) -> AdmissionParams:
    """``base`` with the part-2 flags given (a machine too loaded for it)."""
    over: dict[str, Any] = {}
    if args.runs is not None:
        over["runs"] = args.runs
    if args.hours is not None:
        over["horizon_hours"] = args.hours
    if args.observations is not None:
        over["observations"] = tuple(int(k) for k in args.observations.split(",") if k)
    if args.policies is not None:
        over["policies"] = tuple(p for p in args.policies.split(",") if p)
    return dataclasses.replace(base, **over)


def _regime_lines(summary: AdmissionSummary) -> str:
    """The regime's answer: each moment policy's paired gain and look-ahead rejections, and the
    priors' drift (what the page's "Does the look-ahead gain here?" section shows)."""
    for r in summary.results:
        if r.policy != "zeroth" and r.gain_vs_zeroth is not None:
            print(
                f"  {r.policy}: gain {r.gain_vs_zeroth:+.4f} [{r.gain_ci_low:+.4f}, "
                f"{r.gain_ci_high:+.4f}] (paired over runs), look-ahead rejections "
                f"{r.lookahead_rejections:,}, SLA met {r.sla_met}"
            )
    d = summary.drift
    if d is None:
        return ""
    print(
        f"  drift: E[r/lambda] {d.scaleouts_per_core_lifetime:.3f}, growing share "
        f"{d.growing_share:.3f}, peak E[N]/n of a 1-core arrival {d.peak_ratio:.3f} at "
        f"{d.peak_hours:g} h; E[N]/n at {d.hours} h: "
        + "; ".join(
            f"{n} cores {', '.join(f'{x:.3f}' for x in ratios)}"
            for n, ratios in zip(d.sizes, d.expected_ratio, strict=True)
        )
    )
    gains = " ".join(
        f"gain_{r.policy}={r.gain_vs_zeroth:.4f}" for r in summary.results if r.policy != "zeroth"
    )
    return f" {gains} growing_share={d.growing_share:.3f} peak_ratio={d.peak_ratio:.3f}"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="part 1 small, part 2 tiny")
    ap.add_argument(
        "--regime",
        action="store_true",
        help="part 2 in the paper's regime (REGIME_PARAMS: 3-year runs, Table 2 only); its "
        "tables go to DATA/results/azure-2017/admission/regime unless --out says otherwise",
    )
    ap.add_argument("--params", help="a params.json (default: $TRACELAB_DATA or ./data exports)")
    ap.add_argument("--cores", type=int, default=200)
    ap.add_argument("--steps", type=int, default=600, help="steps per look-ahead horizon")
    ap.add_argument("--workers", type=int, default=1, help="part 2: local processes for the runs")
    ap.add_argument("--dask-address", help="part 2: run on this Dask cluster instead")
    ap.add_argument("--out", help="part 2: keep the stage's tables here (default: a temp folder)")
    ap.add_argument("--table2-only", action="store_true", help="skip part 1 (moment speed)")
    ap.add_argument("--runs", type=int, help="part 2: runs per threshold (default: the reduced)")
    ap.add_argument("--hours", type=float, help="part 2: hours per run (default: the reduced)")
    ap.add_argument(
        "--observations",
        help="part 2: Fig. 1's prior observations, comma-separated ('' = no Fig. 1)",
    )
    ap.add_argument("--policies", help="part 2: Table 2's policies, comma-separated ('' = none)")
    return ap


def _part2_params(args: argparse.Namespace, path: Path) -> AdmissionParams:
    if args.quick:
        return dataclasses.replace(
            PAPER_ADMISSION_PARAMS,
            runs=4,
            horizon_hours=720.0,
            observations=(),
            tuning_iterations=3,
            lookahead_steps=12,
        )
    if args.regime:
        if args.out is None:
            args.out = str(path.parent.parent / "results" / "azure-2017" / "admission" / "regime")
        return _reduced(args, REGIME_PARAMS)
    return _reduced(args, PAPER_ADMISSION_PARAMS)


def main() -> None:
    args = _parser().parse_args()
    path = _params_path(args.params)
    # the naive variant costs deployments x grid per arrival: a quarter-year is enough
    hours = 720.0 if args.quick else HOURS_PER_YEAR / 4
    runs = 1
    rate, naive_s, inc_s = math.nan, math.nan, 1.0
    if not (args.table2_only or args.regime):
        print(f"part 1: second moment, C={args.cores}, {runs} x {hours:g} h, {args.steps} steps")
        rate, naive_s, inc_s = moment_speed(path, args.cores, hours, runs, args.steps)
    params = _part2_params(args, path)
    print(f"part 2: Table 2 and Fig. 1 with tuning: {params}")
    summary, wall, cpu = table2(path, params, args)
    extra = (
        f" table2_wall_s={wall:.0f} table2_cpu_s={cpu:.0f} table2_runs={params.runs}"
        f" table2_hours={params.horizon_hours:g} table2_steps={params.lookahead_steps}"
        f" workers={args.workers}"
    )
    if args.regime:
        extra += _regime_lines(summary)
    print(
        f"RESULT cluster_years_per_cpu_s={rate:.4g} naive_ratio={naive_s / inc_s:.3g}"
        f" steps={args.steps} cores={args.cores}{extra}"
    )


if __name__ == "__main__":
    main()
