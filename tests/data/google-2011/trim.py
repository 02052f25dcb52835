"""Rebuild this excerpt from the real Google 2011 files in ``../shared/data/real`` (see PROVENANCE.md).

Run from the repository root: ``.venv/bin/python tests/data/google-2011/trim.py [SHARED_REAL_DIR]``.
The selection is deterministic, so the files come out byte for byte the same.
"""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
#: jobs of the task_usage sample with fewer task_events rows than this in parts 0, 2 and 3
MAX_EVENTS_PER_JOB = 300
#: and jobs of part 0 wholly inside the window with a FINISH and fewer rows than this (the usage
#: sample's tasks, from the first five minutes, seldom finish within these parts)
MAX_EVENTS_PER_FINISHED_JOB = 60
TASK_EVENT_PARTS = (0, 2, 3)
FINISH = "4"


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as fh:
        return fh.read().splitlines()


def _field(lines: list[str], index: int) -> pl.Series:
    return pl.Series([line.split(",")[index] for line in lines])


def _write(rel: str, lines: list[str]) -> None:
    """Headerless gzip CSV like the published parts: no file name in the header, mtime 0."""
    path = HERE / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(f"{line}\n" for line in lines).encode("utf-8")
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        gz.write(data)
    path.write_bytes(buf.getvalue())
    print(f"{rel}: {len(lines):,} rows, {path.stat().st_size:,} bytes")


def _finished_jobs(lines: list[str], counts: pl.DataFrame) -> set[str]:
    """Jobs whose every row is after time 0, with a FINISH and few rows in all three parts."""
    rows = pl.DataFrame(
        {"job": _field(lines, 2), "time": _field(lines, 0).cast(pl.Int64), "ev": _field(lines, 5)}
    )
    few = counts.filter(pl.col("count") < MAX_EVENTS_PER_FINISHED_JOB)[""].implode()
    per_job = rows.group_by("job").agg(
        pl.col("time").min().alias("first"), (pl.col("ev") == FINISH).any().alias("finished")
    )
    chosen = per_job.filter((pl.col("first") > 0) & pl.col("finished") & pl.col("job").is_in(few))
    return set(chosen["job"].to_list())


def main(real: Path) -> None:
    src = real / "google-clusterdata-2011-2"
    # the sample's first line is a header a third party added; the published file has none
    usage = _lines(src / "task_usage" / "google2011_task_usage_sample.csv")[1:]
    events = {p: _lines(src / f"task_events/part-{p:05d}-of-00500.csv.gz") for p in TASK_EVENT_PARTS}
    counts = pl.concat([_field(lines, 2) for lines in events.values()]).value_counts()
    small = set(counts.filter(pl.col("count") < MAX_EVENTS_PER_JOB)[""].to_list())
    jobs = {j for j in _field(usage, 2).to_list() if j in small} | _finished_jobs(events[0], counts)
    machines: set[str] = set()
    for p, lines in events.items():
        kept = [line for line in lines if line.split(",")[2] in jobs]
        machines |= {m for m in _field(kept, 4).to_list() if m} if kept else set()
        _write(f"task_events/part-{p:05d}-of-00500.csv.gz", kept)
    kept_usage = [line for line in usage if line.split(",")[2] in jobs]
    machines |= set(_field(kept_usage, 4).to_list())
    _write("task_usage/part-00000-of-00500.csv.gz", kept_usage)
    job_lines = _lines(src / "job_events/part-00000-of-00500.csv.gz")
    _write(
        "job_events/part-00000-of-00500.csv.gz",
        [line for line in job_lines if line.split(",")[2] in jobs],
    )
    machine_lines = _lines(src / "machine_events/part-00000-of-00001.csv.gz")
    _write(
        "machine_events/part-00000-of-00001.csv.gz",
        [line for line in machine_lines if line.split(",")[1] in machines],
    )


if __name__ == "__main__":
    default = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "real"
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
