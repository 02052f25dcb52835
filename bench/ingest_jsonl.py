"""Benchmark google-2019's JSON-lines ingest against its reference path and plain Polars.

Generates (or reuses, under ``bench/out/``) the google-2019 generator's ``medium`` trace and
writes one ``instance_usage`` export shard of ``--target-mb`` MB of JSON lines (the generated
shard's lines repeated: the widest table, nested messages and number arrays on every line),
gzip-compressed like the export, plus one of about a quarter of that size (whole repeats of the
generated shard: a third at 400 MB). Then times, each in its
own child process (so its peak RSS is its own, from ``wait4``/``ru_maxrss``):

* ``fast``: :func:`convert_jsonl_file`, what ``tracelab ingest --trace google-2019`` runs per
  shard (the vectorised path, :func:`parse_line` for the lines it does not take); its counts are
  checked (every line written, none rejected);
* ``reference``: the same conversion with every line through :func:`parse_line` (the path
  before the vectorised one, and its definition of a valid line);
* ``polars``: ``pl.read_ndjson(bytes, schema=…)`` of the decompressed shard with the same read
  schema (integers as the export's strings, cast to Int64; nested messages unnested), written
  with ``write_parquet(zstd)``: no check of any line, no source columns, no rejects.

Throughput is lines per CPU-second of the child (user + system, every thread: the machine is
shared, so CPU time is steadier than wall time), measured around the conversion after the
imports. ``fast`` also runs on the quarter-size shard: its peak RSS beside the full one's shows
that memory does not grow with the file. Prints a table and, as its last line, ``RESULT
lines_per_cpu_s=… reference_lines_per_cpu_s=… speedup=… baseline_lines_per_cpu_s=… ratio=…
peak_rss_mb=… peak_rss_quarter_mb=… gz_mb_per_cpu_s=…``. Never run in tests.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the code whose speed this benchmark measures (see bench/check.py)
MEASURES = (
    "analysis/lake/ingest_jsonl.py",
    "analysis/lake/ingest_jsonl_fast.py",
    "analysis/lake/ingest_stream.py",
    "analysis/traces/google2019.py",
)

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TRACE = "google-2019"
TABLE = "instance_usage"
ENGINES = ("fast", "reference", "polars")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target-mb", type=int, default=400, help="MB of JSON lines per shard")
    parser.add_argument("--seed", type=int, default=7, help="generator seed")
    parser.add_argument("--out", type=Path, default=REPO / "bench/out", help="work folder")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated subset")
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--raw", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--dest", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _shards(out: Path, target_mb: int, seed: int) -> tuple[Path, Path]:
    """The full and the quarter-size instance_usage shard (generated once, then reused)."""
    folder = out / f"{TRACE}-seed{seed}-medium"
    source = folder / TABLE / f"{TABLE}-000000000000.json.gz"
    if not source.is_file():
        from tracelab.analysis.synthetic.google2019 import generate_google_2019

        print(f"generating the medium {TRACE} trace into {folder} ...", flush=True)
        generate_google_2019(folder, seed=seed, scale="medium")
    size = _json_bytes(source)
    paths = []
    for name, mb in (("full", target_mb), ("quarter", target_mb / 4)):
        path = out / f"{TRACE}-{TABLE}-{mb:g}mb-{name}" / TABLE / f"{TABLE}-000000000000.json.gz"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            # streamed: this process stays small, so no child starts with its memory
            with gzip.open(path, "wb", compresslevel=6) as fh:
                for _ in range(max(1, round(mb * 1e6 / size))):
                    with gzip.open(source, "rb") as src:
                        shutil.copyfileobj(src, fh, 1 << 20)
        paths.append(path)
    return paths[0], paths[1]


def _json_bytes(path: Path) -> int:
    """Decompressed size of a gzip file, streamed."""
    size = 0
    with gzip.open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            size += len(block)
    return size


def _child(engine: str, raw: Path, dest: Path) -> None:
    """One conversion; prints LINES and CPU_SECONDS (CPU time of the conversion, every thread)."""
    import polars as pl

    from tracelab.analysis.lake.ingest import RawFile, lake_paths
    from tracelab.analysis.lake.ingest_jsonl import JsonShape, _write, convert_jsonl_file
    from tracelab.analysis.lake.ingest_jsonl_fast import FastShape
    from tracelab.analysis.lake.schemas import table

    spec = table(TRACE, TABLE)
    rel = f"{TABLE}/{raw.name}"
    info = RawFile(TABLE, raw, rel, raw.stat().st_size)
    paths = lake_paths(dest, info.table, info.rel)
    for p in (paths.parquet, paths.rejects):
        p.parent.mkdir(parents=True, exist_ok=True)
    started = time.process_time()
    if engine == "fast":
        result = convert_jsonl_file(spec, info, paths)
        if result.status != "ok" or result.rows_rejected:
            raise SystemExit(f"fast path did not convert every line: {result}")
        lines = result.rows_read
    elif engine == "reference":
        lines = _write(JsonShape.of(spec), info, paths, 32 << 20, fast=False).rows_read
    else:
        shape = FastShape.of(spec, frozenset())
        frame = pl.read_ndjson(gzip.decompress(raw.read_bytes()), schema=shape.read_schema)
        ints = [pl.col(c.name).cast(pl.Int64) for c in spec.columns if c.kind == "int"]
        nested = [k for k, v in shape.read_schema.items() if isinstance(v, pl.Struct)]
        frame = frame.with_columns(ints).unnest(nested, separator="_")
        frame.write_parquet(dest / "baseline.parquet", compression="zstd")
        lines = frame.height
    print(f"LINES {lines}\nCPU_SECONDS {time.process_time() - started}", flush=True)


def _timed(engine: str, raw: Path, work: Path) -> dict[str, float]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cmd = [sys.executable, __file__, "--child", engine, "--raw", str(raw), "--dest", str(work)]
    with tempfile.TemporaryFile() as out_file:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out_file)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        out_file.seek(0)
        out = out_file.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{engine} failed:\n{out[-2000:]}")
    values = dict(line.split() for line in out.splitlines() if line.split()[0].isupper())
    return {
        "lines": float(values["LINES"]),
        "cpu": float(values["CPU_SECONDS"]),
        "wall": seconds,
        "rss_mb": usage.ru_maxrss / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.child:
        _child(args.child, args.raw, args.dest)
        return 0
    engines = [e for e in args.engines.split(",") if e]
    full, quarter = _shards(args.out, args.target_mb, args.seed)
    raw_mb = _json_bytes(full) / 1e6
    gz_mb = full.stat().st_size / 1e6
    runs = {e: _timed(e, full, args.out / f"work-jsonl-{e}") for e in engines}
    small = _timed("fast", quarter, args.out / "work-jsonl-quarter")
    print(f"shard: {raw_mb:,.0f} MB of JSON lines ({gz_mb:,.0f} MB gzip), load {os.getloadavg()}")
    print(
        "| engine | lines | CPU s | lines/CPU-s | wall s | peak RSS MB |\n|---|---|---|---|---|---|"
    )
    for engine, r in {**runs, "fast (quarter)": small}.items():
        rate = r["lines"] / r["cpu"]
        print(
            f"| {engine} | {r['lines']:,.0f} | {r['cpu']:.1f} | {rate:,.0f} | {r['wall']:.1f} "
            f"| {r['rss_mb']:,.0f} |"
        )
    result = _result(runs, small, gz_mb)
    print("RESULT " + " ".join(f"{k}={v}" for k, v in result.items()))
    return 0


def _result(
    runs: dict[str, dict[str, float]], small: dict[str, float], gz_mb: float
) -> dict[str, float]:
    def rate(engine: str) -> float:
        return runs[engine]["lines"] / runs[engine]["cpu"] if engine in runs else float("nan")

    fast = runs.get("fast", small)
    return {
        "lines_per_cpu_s": round(rate("fast")),
        "reference_lines_per_cpu_s": round(rate("reference")),
        "speedup": round(rate("fast") / rate("reference"), 2),
        "baseline_lines_per_cpu_s": round(rate("polars")),
        "ratio": round(rate("fast") / rate("polars"), 2),
        "peak_rss_mb": round(fast["rss_mb"]),
        "peak_rss_quarter_mb": round(small["rss_mb"]),
        "gz_mb_per_cpu_s": round(gz_mb / fast["cpu"], 2),
    }


if __name__ == "__main__":
    raise SystemExit(main())
