"""Two data directories hold the same outputs: every lake, derived and result Parquet file and the
params export, compared value by value (floats to a relative 1e-9).

A refactor that must not change outputs is checked by running ``tracelab run`` at the commit before
and after it into two data directories, then::

    .venv/bin/python bench/outputs_equal.py DATA_BEFORE DATA_AFTER

Prints one line per file that differs or exists on one side only, then ``RESULT files=N
differ=M``; exits 1 when any differs. Never a test: it compares two runs made by hand.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

#: a comparison of two runs, not a benchmark: it measures no code (bench/check.py)
MEASURES = ()
#: the folders whose Parquet files are outputs (raw/ is input, site/ and logs are presentation)
FOLDERS = ("lake", "derived", "results")
REL_TOL = 1e-9
#: columns that say when or how fast a file was made, not what it holds
_VOLATILE = frozenset({"created_at", "started_at", "seconds", "elapsed_s"})
#: JSON keys of the same kind, and the code version every export names
_VOLATILE_KEYS = frozenset({"created_at", "code_version", "document_sha256"})


def parquet_files(data_dir: Path) -> dict[str, Path]:
    """Every output Parquet file under the data directory, by its path relative to it."""
    return {
        p.relative_to(data_dir).as_posix(): p
        for folder in FOLDERS
        for p in sorted((data_dir / folder).rglob("*.parquet"))
    }


def frame_difference(a: Path, b: Path) -> str:
    """ "" when the two files hold the same rows (floats within REL_TOL), else the first reason."""
    left, right = pl.read_parquet(a), pl.read_parquet(b)
    drop = [c for c in left.columns if c in _VOLATILE or c.endswith("_ms")]
    try:
        assert_frame_equal(
            left.drop(drop),
            right.drop([c for c in drop if c in right.columns]),
            check_exact=False,
            rel_tol=REL_TOL,
            abs_tol=0.0,
        )
    except AssertionError as error:
        return str(error).splitlines()[0]
    return ""


def json_difference(a: object, b: object, where: str = "") -> str:
    """ "" when two JSON values are equal (numbers within REL_TOL), else the first path that differs."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key in _VOLATILE_KEYS:
                continue
            found = json_difference(a.get(key), b.get(key), f"{where}/{key}")
            if found:
                return found
        return ""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} against {len(b)} items"
        return next(
            (d for x, y in zip(a, b, strict=True) if (d := json_difference(x, y, where))), ""
        )
    if isinstance(a, float | int) and isinstance(b, float | int):
        return "" if math.isclose(a, b, rel_tol=REL_TOL, abs_tol=0.0) else f"{where}: {a} != {b}"
    return "" if a == b else f"{where}: {a!r} != {b!r}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    before, after = parquet_files(args.before), parquet_files(args.after)
    problems = [f"{rel}: only in {args.before}" for rel in sorted(set(before) - set(after))]
    problems += [f"{rel}: only in {args.after}" for rel in sorted(set(after) - set(before))]
    for rel in sorted(set(before) & set(after)):
        found = frame_difference(before[rel], after[rel])
        if found:
            problems.append(f"{rel}: {found}")
    export = Path("exports/params.json")
    if (args.before / export).is_file() and (args.after / export).is_file():
        found = json_difference(
            json.loads((args.before / export).read_text(encoding="utf-8")),
            json.loads((args.after / export).read_text(encoding="utf-8")),
        )
        if found:
            problems.append(f"{export}: {found}")
    for line in problems:
        print(line)
    print(f"RESULT files={len(set(before) | set(after))} differ={len(problems)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
