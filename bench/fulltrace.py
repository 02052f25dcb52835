"""The whole pipeline at fractions of the full Google 2011 trace, extrapolated to all of it.

For each ``--fraction`` (default 1/40 and 1/10 of the full trace's ~1.23 billion task_usage rows)
it generates (or reuses, under ``--out``) a synthetic google-2011 trace in published-size parts
(``--part-mb 350``, as :mod:`bench.ingest` does; ``target_mb`` = the fraction of the published
trace's raw MB), then runs the real command line ``tracelab run --trace google-2011 --raw …``
in a fresh data directory, as a child process, and measures each stage from the lines the command
prints (``[stage] trace ...`` when it starts, ``… ok in X s`` when it ends):

* wall seconds (the command's own figure; "startup" is interpreter + Prefect start-up before the
  first stage, "report" runs to the summary table);
* CPU seconds (user + system) and peak RSS of the command and every process below it (local Dask
  workers with ``--workers``), sampled every 0.2 s with psutil;
* rows: the lake's task_usage rows (the size axis), and the rows of the Parquet files each stage
  wrote (from their footers).

From two sizes (the smallest and largest measured, this run's or earlier runs' stored in
``--out/results-<fraction>.json``, each naming its commit and load; ``--stored-only`` just
prints them) each stage's scaling exponent is ``b = ln(c2/c1) / ln(n2/n1)`` on CPU seconds
against task_usage rows (on a shared machine wall time follows the other jobs' load as much as
the input), and the stage's full-trace wall and CPU times are ``t2 * (N/n2)^b``. The wall
estimate carries the load the larger size was measured under; the CPU estimate is what an idle
machine needs at most (a stage that keeps both cores busy takes about half of it in wall time). With one size only, every stage is extrapolated linearly
(``b = 1``) and the RESULT line says ``worst_exponent=nan``. The worst exponent is taken over the
stages whose extrapolated time is at least 1% of the total (a 0.1 s stage's exponent is noise).
The figures are only as good as the machine was idle: note ``uptime`` beside them.

Peak RSS is extrapolated the same way, with its own exponent per stage (``full_rss_gb``: the
largest stage's; a stage whose memory does not grow with the input stays at its measured peak).

Last line: ``RESULT full_trace_h=… full_trace_cpu_h=… peak_rss_gb=… full_rss_gb=…
worst_exponent=… stage=…``. Never run in tests.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

#: the whole pipeline: every stage's code and SQL, and the command that runs them
MEASURES = ("analysis", "flows", "queries", "reports")

TRACE = "google-2011"
#: task_usage rows of the whole published trace (clusterdata-2011-2)
FULL_USAGE_ROWS = 1_232_799_308
#: raw (decompressed) MB of the whole published trace: 500 task_usage parts of ~350 MB, 500
#: task_events parts of ~35 MB, and job_events, machine_events, machine_attributes (~2 GB)
FULL_RAW_MB = 500 * (350 + 35) + 2_000
DEFAULT_FRACTIONS = (1 / 40, 1 / 10)
#: DuckDB's buffer per connection: below what 1/40 needs, so every size spills and the peak is
#: the bound, not the input (see docs/benchmarks.md)
DUCKDB_MEMORY = "1GB"
_START = re.compile(r"^\[(?P<stage>[\w-]+)\] (?P<trace>\S+) \.\.\.$|^\[report\] \.\.\.$")
_END = re.compile(
    r"^\[(?P<stage>[\w-]+)\] (?P<trace>[\w-]+) (?P<status>ok|failed) in (?P<s>[\d.]+) s"
)
_STEP = re.compile(r"^\[(?:[\w-]+\] )?\d+/\d+\]? (?P<step>[\w-]+) \.\.\.$")
_SAMPLE_S = 0.2


@dataclass
class StageFigures:
    stage: str
    status: str = "ok"
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    rows_out: int = 0
    #: peak RSS MB of each numbered step the stage prints (``[statistics] 3/6 clustering ...``)
    steps: dict[str, float] = field(default_factory=dict)


@dataclass
class SizeRun:
    fraction: float
    usage_rows: int
    raw_gb: float
    data_gb: float
    commit: str
    load: str
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    stages: list[StageFigures] = field(default_factory=list)
    #: TRACELAB_DUCKDB_MEMORY the command ran with ("" in runs stored before it was recorded: 8GB)
    duckdb_memory: str = ""


class TreeSampler:
    """CPU seconds and RSS of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int) -> None:
        import psutil

        self._root = psutil.Process(pid)
        self._cpu_seen: dict[int, float] = {}
        self.rss_mb = 0.0
        self.window_peak_mb = 0.0
        self.step_peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(_SAMPLE_S):
            self.sample()

    def sample(self) -> None:
        import psutil

        try:
            procs = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            return
        rss = 0
        for p in procs:
            try:
                times = p.cpu_times()
                rss += p.memory_info().rss
            except psutil.Error:
                continue  # ended between the listing and the read: its last sample stands
            # a waited-for child's CPU also shows in its parent's children_* times: count each
            # process by its own time only, keeping the last figure of those that ended
            self._cpu_seen[p.pid] = times.user + times.system
        self.rss_mb = rss / 1e6
        self.window_peak_mb = max(self.window_peak_mb, self.rss_mb)
        self.step_peak_mb = max(self.step_peak_mb, self.rss_mb)

    def cpu_s(self) -> float:
        return sum(self._cpu_seen.values())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/fulltrace.py", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--fraction",
        type=float,
        action="append",
        help="fraction of the full trace's task_usage rows; repeat for several "
        "(default: 1/40 and 1/10)",
    )
    parser.add_argument("--seed", type=int, default=26, help="generator seed (default 26)")
    parser.add_argument("--part-mb", type=float, default=350, help="raw MB per task_usage part")
    parser.add_argument("--workers", type=int, default=0, help="local Dask workers (default 0)")
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench/out/fulltrace", help="work folder"
    )
    parser.add_argument(
        "--stored-only",
        action="store_true",
        help="measure nothing: print the sizes stored under --out and their extrapolation",
    )
    parser.add_argument(
        "--duckdb-memory",
        default=DUCKDB_MEMORY,
        help=f"TRACELAB_DUCKDB_MEMORY of the command (default {DUCKDB_MEMORY})",
    )
    parser.add_argument(
        "--use",
        type=float,
        action="append",
        help="extrapolate from these stored fractions only (repeat; default: the smallest and "
        "largest stored)",
    )
    parser.add_argument(
        "--keep-raw", action="store_true", help="keep the generated raw trace (default: delete)"
    )
    return parser.parse_args(argv)


def _dir_gb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e9


def _generate(out: Path, fraction: float, seed: int, part_mb: float) -> Path:
    """The generated raw trace folder (reused when a complete one is there)."""
    from tracelab.analysis.synthetic import generate_trace

    folder = out / f"raw-{fraction:g}-seed{seed}" / TRACE
    if not (folder / "TRUTH.json").is_file():
        target_mb = fraction * FULL_RAW_MB
        print(f"generating {target_mb:,.0f} MB of raw {TRACE} into {folder} ...", flush=True)
        started = time.perf_counter()
        generate_trace(
            TRACE, folder, seed=seed, scale="large", target_mb=target_mb, part_mb=part_mb
        )
        print(f"generated in {time.perf_counter() - started:.0f} s", flush=True)
    return folder


def _commit() -> str:
    git = ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]
    return subprocess.run(git, capture_output=True, text=True, check=False).stdout.strip()


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _env(data: Path, duckdb_memory: str) -> dict[str, str]:
    return {
        "TRACELAB_DUCKDB_MEMORY": duckdb_memory,
        **{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")},
        "PREFECT_HOME": str(data.parent / "prefect-home"),
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }


class StageWindows:
    """Attributes the sampled CPU and RSS to the stage the command's output says is running."""

    def __init__(self, sampler: TreeSampler) -> None:
        self.sampler = sampler
        self.stages: list[StageFigures] = []
        self._open: StageFigures | None = StageFigures("startup")
        self._since = time.perf_counter()
        self._cpu_since = 0.0
        self._gap = StageFigures("between")  # fingerprints, catalog: between two stages
        self._step = ""

    def _close_step(self, to: str) -> None:
        """Ends the open stage's numbered step (if any) and starts ``to`` ("" for none)."""
        self.sampler.sample()
        if self._step and self._open is not None:
            peak = max(self._open.steps.get(self._step, 0.0), self.sampler.step_peak_mb)
            self._open.steps[self._step] = peak
        self._step, self.sampler.step_peak_mb = to, self.sampler.rss_mb

    def _switch(self, to: StageFigures | None) -> None:
        self._close_step("")
        now, cpu = time.perf_counter(), self.sampler.cpu_s()
        done = self._open or self._gap
        if not (self._open and done.wall_s):  # a stage's own figure, when it printed one
            done.wall_s += now - self._since
        done.cpu_s += cpu - self._cpu_since
        done.peak_rss_mb = max(done.peak_rss_mb, self.sampler.window_peak_mb)
        if self._open is not None:
            self.stages.append(self._open)
        self.sampler.window_peak_mb = self.sampler.rss_mb
        self._open, self._since, self._cpu_since = to, now, cpu

    def line(self, text: str) -> None:
        start, end, step = _START.match(text), _END.match(text), _STEP.match(text)
        if step and self._open is not None:
            self._close_step(step["step"])
        elif start:
            self._switch(StageFigures(start["stage"] or "report"))
        elif end and self._open is not None and end["stage"] == self._open.stage:
            self._open.status, self._open.wall_s = end["status"], float(end["s"])
            self._switch(None)
        elif self._open is not None and self._open.stage == "report" and text.startswith("  "):
            self._switch(None)  # the summary table: the report is done

    def finish(self) -> list[StageFigures]:
        self._switch(None)
        return [*self.stages, self._gap]


def _run_pipeline(
    raw: Path, data: Path, workers: int, duckdb_memory: str
) -> tuple[list[StageFigures], float, float]:
    """Each stage's figures, the whole command's wall seconds and peak RSS (MB)."""
    command = [str(Path(sys.executable).parent / "tracelab"), "run", "--data", str(data)]
    command += ["--trace", TRACE, "--raw", str(raw)]
    command += ["--workers", str(workers)] if workers else []
    started = time.perf_counter()
    proc = subprocess.Popen(
        command,
        env=_env(data, duckdb_memory),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    sampler = TreeSampler(proc.pid)
    windows = StageWindows(sampler)
    log: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        log.append(line)
        print(line, end="", flush=True)
        windows.line(line.rstrip())
    proc.wait()
    stages = windows.finish()
    sampler.stop()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"tracelab run failed ({proc.returncode}):\n{''.join(log[-40:])}")
    return stages, wall, max(s.peak_rss_mb for s in stages)


def _rows_out(data: Path, stages: list[StageFigures]) -> None:
    """Rows of the Parquet files each stage wrote (their footers only)."""
    import pyarrow.parquet as pq

    from tracelab.flows.registry import stage_named

    for figures in stages:
        try:
            stage = stage_named(figures.stage)
        except Exception:
            continue  # startup, ingest, report: not registry stages
        for path in stage.output_paths(data, TRACE):
            files = [path] if path.is_file() else sorted(path.rglob("*.parquet"))
            figures.rows_out += sum(
                pq.ParquetFile(f).metadata.num_rows for f in files if f.suffix == ".parquet"
            )


def _usage_rows(data: Path) -> int:
    import polars as pl

    manifest = pl.read_parquet(data / "lake" / TRACE / "_manifest.parquet")
    usage = manifest.filter(pl.col("table") == "task_usage")
    return int(usage["rows_written"].sum())


def measure(args: argparse.Namespace, fraction: float) -> SizeRun:
    raw = _generate(args.out, fraction, args.seed, args.part_mb)
    data = args.out / f"data-{fraction:g}"
    shutil.rmtree(data.parent / "prefect-home", ignore_errors=True)
    shutil.rmtree(data, ignore_errors=True)
    load = _load()
    stages, wall, peak = _run_pipeline(raw, data, args.workers, args.duckdb_memory)
    _rows_out(data, stages)
    run = SizeRun(
        fraction=fraction,
        usage_rows=_usage_rows(data),
        raw_gb=_dir_gb(raw),
        data_gb=_dir_gb(data),
        commit=_commit(),
        load=f"{load} -> {_load()}",
        wall_s=wall,
        cpu_s=sum(s.cpu_s for s in stages),
        peak_rss_mb=peak,
        stages=stages,
        duckdb_memory=args.duckdb_memory,
    )
    (args.out / f"results-{fraction:g}.json").write_text(json.dumps(asdict(run), indent=1))
    shutil.rmtree(data, ignore_errors=True)
    if not args.keep_raw:
        shutil.rmtree(raw.parent, ignore_errors=True)
    return run


def _stored(out: Path) -> list[SizeRun]:
    """Every size measured so far (each records its commit and load)."""
    runs = []
    for path in sorted(out.glob("results-*.json")):
        doc = json.loads(path.read_text())
        stages = [StageFigures(**s) for s in doc.pop("stages")]
        runs.append(SizeRun(**doc, stages=stages))
    return runs


def _exponent(small: float, large: float, n_small: int, n_large: int) -> float:
    # a stage too short to time at either size does not scale measurably
    if small <= 0.05 or large <= 0.05 or n_large == n_small:
        return 0.0
    return math.log(large / small) / math.log(n_large / n_small)


def extrapolate(runs: list[SizeRun]) -> list[tuple[str, float, float, float, float, float]]:
    """Per stage: exponent, wall s at the largest size, full-trace wall s, CPU s and RSS MB.

    The exponent is measured on CPU seconds: on a shared machine a stage's wall time follows the
    other jobs' load as much as its input, its CPU time much less so.
    """
    runs = sorted(runs, key=lambda r: r.usage_rows)
    small, large = runs[0], runs[-1]
    two = len(runs) > 1 and large.usage_rows > small.usage_rows
    by_stage = {s.stage: s for s in small.stages}
    rows = []
    for stage in large.stages:
        other = by_stage.get(stage.stage)
        b, b_rss = 1.0, 0.0
        if two and other is not None:
            b = _exponent(other.cpu_s, stage.cpu_s, small.usage_rows, large.usage_rows)
            rss = (other.peak_rss_mb, stage.peak_rss_mb)
            b_rss = max(0.0, _exponent(*rss, small.usage_rows, large.usage_rows))
        growth = FULL_USAGE_ROWS / large.usage_rows
        full_rss = stage.peak_rss_mb * growth**b_rss
        rows.append(
            (
                stage.stage,
                b,
                stage.wall_s,
                stage.wall_s * growth**b,
                stage.cpu_s * growth**b,
                full_rss,
            )
        )
    return rows


def _print_size(run: SizeRun) -> None:
    print(
        f"\nfraction {run.fraction:g}: {run.usage_rows:,} task_usage rows "
        f"({run.usage_rows / FULL_USAGE_ROWS:.4f} of the full trace), raw {run.raw_gb:.1f} GB, "
        f"data dir {run.data_gb:.1f} GB; load {run.load}; commit {run.commit}; "
        f"TRACELAB_DUCKDB_MEMORY {run.duckdb_memory or '8GB (default then)'}"
    )
    print(
        f"{'stage':<12} {'status':<9} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>11} {'rows':>12}"
    )
    for s in run.stages:
        print(
            f"{s.stage:<12} {s.status:<9} {s.wall_s:>8.1f} {s.cpu_s:>8.1f} "
            f"{s.peak_rss_mb:>11.0f} {s.rows_out:>12,}"
        )
        if s.steps:
            print("  peak RSS MB by step: " + ", ".join(f"{k} {v:.0f}" for k, v in s.steps.items()))
    print(f"{'total':<12} {'':<9} {run.wall_s:>8.1f} {run.cpu_s:>8.1f} {run.peak_rss_mb:>11.0f}")


def _print_estimate(runs: list[SizeRun]) -> None:
    table = extrapolate(runs)
    wall = sum(row[3] for row in table)
    cpu = sum(row[4] for row in table)
    sizes = ", ".join(f"{r.usage_rows:,}" for r in sorted(runs, key=lambda r: r.usage_rows))
    print(f"\nextrapolated to {FULL_USAGE_ROWS:,} task_usage rows from sizes {sizes}")
    print(
        f"{'stage':<12} {'exponent':>8} {'wall s':>8} {'full h':>8} {'full CPU h':>10} "
        f"{'full RSS GB':>11}"
    )
    for stage, b, measured, full_wall, full_cpu, full_rss in table:
        print(
            f"{stage:<12} {b:>8.2f} {measured:>8.1f} {full_wall / 3600:>8.2f} "
            f"{full_cpu / 3600:>10.2f} {full_rss / 1e3:>11.1f}"
        )
    counted = [(row[1], row[0]) for row in table if row[4] >= 0.01 * cpu]
    worst_b, worst_stage = max(counted) if len(runs) > 1 else (math.nan, "none")
    peak_gb = max(r.peak_rss_mb for r in runs) / 1e3
    full_rss = max(table, key=lambda row: row[5])
    print(
        f"RESULT full_trace_h={wall / 3600:.2f} full_trace_cpu_h={cpu / 3600:.2f} "
        f"peak_rss_gb={peak_gb:.2f} full_rss_gb={full_rss[5] / 1e3:.1f} "
        f"worst_exponent={worst_b:.2f} stage={worst_stage}"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    fractions = [] if args.stored_only else args.fraction or DEFAULT_FRACTIONS
    for fraction in fractions:
        if not 0 < fraction <= 1:
            raise SystemExit(f"--fraction {fraction}: must be in (0, 1]")
        _print_size(measure(args, fraction))
    runs = _stored(args.out)
    if args.use:
        runs = [r for r in runs if any(math.isclose(r.fraction, f) for f in args.use)]
    if not runs:
        raise SystemExit(f"no measured size under {args.out}: run with --fraction first")
    if args.stored_only:
        for run in sorted(runs, key=lambda r: r.usage_rows):
            _print_size(run)
    _print_estimate(runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
