"""Rebuild this excerpt from the real Alibaba 2018 files in ``../shared/data/real`` (PROVENANCE.md).

Run from the repository root: ``.venv/bin/python tests/data/alibaba-2018/trim.py [SHARED_REAL_DIR]``.
The selection is deterministic and the gzip header carries no name and mtime 0, so the files
come out byte for byte the same.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = "alibaba-cluster-trace-v2018"
#: lines of the batch_task sample kept: its added header line and the first 5,000 rows
BATCH_TASK_LINES = 5_001
#: (file in ../shared, table, lines kept or None for all)
FILES = (
    ("alibaba2018_batch_task_sample.csv", "batch_task", BATCH_TASK_LINES),
    ("alibaba2018_container_meta_sample.csv", "container_meta", None),
    ("alibaba2018_machine_meta.csv", "machine_meta", None),
)


def _write(table: str, data: bytes) -> None:
    path = HERE / table / f"{table}.csv.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
        gz.write(data)


def main(real: Path) -> None:
    for name, table, keep in FILES:
        lines = (real / SOURCE / name).read_bytes().splitlines(keepends=True)
        _write(table, b"".join(lines[:keep]))


if __name__ == "__main__":
    default = HERE.parents[3] / "shared" / "data" / "real"
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
