"""Benchmark the placement stage: a generated Azure-V1-sized stream through all policies.

Writes its own params document through the real export path (the sample generator's true
deployment model as the fitted records), then runs :func:`analysis.placement.placement_results`
with :data:`PAPER_PLACEMENT_PARAMS` (24 pools, stream generated from the params; about 2 million
VMs) on a process pool. In the same run it replays a subset of pool 0 under Best Fit twice — with
the vectorised replay and with a direct per-host Python loop — checks that both place every VM on
the same host, and compares their speeds.

Prints a table and, as its last line,
``RESULT vm_events_per_s=… naive_ratio=…`` where ``vm_events_per_s`` is VM creations and
deletions replayed per wall-clock second over every replay of the stage (generation included),
and ``naive_ratio`` is the vectorised Best Fit replay's events per second divided by the
per-host Python loop's on the same subset (same VMs, same hosts, same placements).
``--quick``: two small pools. Never run in tests.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from tracelab.analysis.common.fitted_params import FittedParameter, Quantity, write_stage_params  # noqa: E402
from tracelab.analysis.export.document import load_params, params_document, write_params_json  # noqa: E402
from tracelab.analysis.placement.model import lifetime_prior_from_params  # noqa: E402
from tracelab.analysis.placement.options import PAPER_PLACEMENT_PARAMS, PlacementParams  # noqa: E402
from tracelab.analysis.placement.replay import replay  # noqa: E402
from tracelab.analysis.placement.stage import (  # noqa: E402
    placement_results,
    replay_inputs,
)
from tracelab.analysis.placement.stream import (  # noqa: E402
    VmStream,
    deployment_model_from_params,
    generated_pools,
)
from tracelab.analysis.synthetic.azure2017 import AzureModel  # noqa: E402

#: the code whose speed this benchmark measures: `make bench-check` lists every row of
#: docs/benchmarks.md measured before the last change to these files
MEASURES = (
    "analysis/placement",
    "analysis/synthetic/azure2017.py",
)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Time the placement replays.")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "placement")
    parser.add_argument("--quick", action="store_true", help="two small pools instead of 24")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--naive-vms", type=int, default=3000, help="VMs in the naive subset")
    return parser.parse_args(argv)


def _records() -> list[FittedParameter]:
    """The generator's true model as params records (both record families)."""
    m = AzureModel()

    def rec(name: str, dist: str, params: dict[str, float]) -> FittedParameter:
        return FittedParameter(
            name=name,
            distribution=dist,
            parameters={k: Quantity(v, "") for k, v in params.items()},
            method="true value of the sample generator",
            n=0,
            stage="priors",
            trace="azure-2017",
        )

    out: list[FittedParameter] = []
    for sfx in ("", "_marginal"):
        out += [
            rec(f"core_lifetime_rate_prior{sfx}", "gamma", _gamma(m.lifetime_rate)),
            rec(
                f"normalised_scaleout_rate_prior{sfx}",
                "gamma",
                _gamma(m.normalised_scaleout_rate),
            ),
            rec(f"scaleout_size_prior{sfx}", "gamma", _gamma(m.scaleout_size)),
            rec(f"scaleout_alpha{sfx}", "constant", {"alpha": m.alpha}),
            rec(f"deployment_shutdown{sfx}", "exponential", {"rate": m.shutdown_rate}),
        ]
    return out


def _gamma(prior: Any) -> dict[str, float]:
    return {"shape": float(prior.shape), "rate": float(prior.rate)}


def _export(data: Path) -> Path:
    write_stage_params(data / "results" / "azure-2017" / "priors", _records())
    doc = params_document(data, created_at=datetime.now(UTC), version="bench")
    return write_params_json(doc, data / "exports" / "params.json")


def naive_best_fit(stream: VmStream, hosts: int, cores: float, memory: float) -> list[int]:
    """Best Fit as a direct loop over hosts for every VM: the baseline the replay is timed against."""
    events = sorted(
        [(int(stream.deleted_s[v]), 0, v) for v in range(len(stream))]
        + [(int(stream.created_s[v]), 1, v) for v in range(len(stream))]
    )
    free_c, free_m = [cores] * hosts, [memory] * hosts
    count = [0] * hosts
    host_of = [-1] * len(stream)
    for _, kind, v in events:
        c, m = float(stream.cores[v]), float(stream.memory_gb[v])
        if kind == 0:
            h = host_of[v]
            if h >= 0:
                count[h] -= 1
                free_c[h], free_m[h] = (
                    (cores, memory) if count[h] == 0 else (free_c[h] + c, free_m[h] + m)
                )
            continue
        best, best_key = -1, float("inf")
        for h in range(hosts):
            if free_c[h] >= c and free_m[h] >= m:
                key = free_c[h] / cores + free_m[h] / memory
                if key < best_key:
                    best, best_key = h, key
        if best >= 0:
            free_c[best] -= c
            free_m[best] -= m
            count[best] += 1
        host_of[v] = best
    return host_of


def _naive_comparison(params: PlacementParams, data: Path, n_vms: int) -> tuple[float, float]:
    """(vectorised, naive) events per second of Best Fit on the first VMs of pool 0."""
    doc = load_params(data / "exports" / "params.json")
    model = deployment_model_from_params(doc, marginal=True)
    pool = generated_pools(
        model, params.pool_hosts[:1], params.host_cores, params.target_load, params.seed
    )[0]
    sub = pool.take(np.arange(min(n_vms, len(pool))))
    prior = lifetime_prior_from_params(doc, params.lifetime_record)
    one = replace(params, pool_hosts=params.pool_hosts[:1], policies=("best-fit",))
    item = replay_inputs(one, [sub], prior)[0]
    item = replace(item, config=replace(item.config, record=True, inflation_every_s=0))
    start = time.perf_counter()
    fast = replay(item)
    fast_s = time.perf_counter() - start
    start = time.perf_counter()
    slow = naive_best_fit(sub, params.pool_hosts[0], params.host_cores, params.host_memory_gb)
    slow_s = time.perf_counter() - start
    assert fast.host_of is not None
    if fast.host_of.tolist() != slow:
        raise SystemExit("the naive loop and the replay placed VMs differently")
    return 2 * len(sub) / fast_s, 2 * len(sub) / slow_s


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished workers."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024.0


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    data = args.out / "data"
    _export(data)
    params = PAPER_PLACEMENT_PARAMS
    if args.quick:
        params = replace(params, pool_hosts=(60, 90))
    print(f"pools {len(params.pool_hosts)}, hosts {sum(params.pool_hosts)}, workers {args.workers}")
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        start = time.perf_counter()
        summary = placement_results(
            params,
            data,
            data / "results" / "azure-2017" / "placement",
            progress=lambda d, t, w: print(f"  {d}/{t} {w} {time.perf_counter() - start:.0f} s"),
            map_fn=lambda fn, items: list(pool.map(fn, items)),
        )
        total_s = time.perf_counter() - start
    rate = summary.events / total_s
    fast, slow = _naive_comparison(params, data, args.naive_vms)
    print(f"VMs {summary.vms:,}  replays {summary.replays}  events {summary.events:,}")
    print(
        f"wall {total_s:.1f} s (generation included), CPU {_cpu_seconds():.1f} s, "
        f"peak RSS {_peak_rss_mb():.0f} MB"
    )
    for key, pp in summary.improvement_pp.items():
        print(f"  {key:20s} {summary.empty_host_pct[key]:6.2f} % empty  {pp:+.2f} pp vs Best Fit")
    print(f"  best-fit             {summary.empty_host_pct['best-fit/none']:6.2f} % empty")
    print(
        f"LARS migrations: baseline order {summary.lars_baseline_migrations}, LARS "
        f"{summary.lars_model_migrations}, oracle {summary.lars_oracle_migrations}"
    )
    print(f"subset Best Fit: vectorised {fast:,.0f} events/s, per-host loop {slow:,.0f} events/s")
    print(f"RESULT vm_events_per_s={rate:.0f} naive_ratio={fast / slow:.2f}")


if __name__ == "__main__":
    main()
