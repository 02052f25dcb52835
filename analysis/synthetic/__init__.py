"""Seeded synthetic traces in the exact published formats, with their true parameters.

``generate_trace`` is the one entry point; each trace has its own module
(:mod:`analysis.synthetic.google2011`, :mod:`analysis.synthetic.azure2017`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.generating import GENERATING_MARKER
from tracelab.analysis.synthetic.request import check_request


@contextmanager
def generation(out: Path) -> Iterator[None]:
    """Mark ``out`` as a partial sample for the block; the mark goes only when the block ends well.

    A generation killed at any point (while a part is written, between the renames of the parts,
    before TRUTH.json) leaves the marker, so `run` generates again and ingest refuses the folder
    instead of taking the parts that happen to be there for the whole trace.
    """
    if out.exists() and not out.is_dir():
        raise TracelabError(f"--out {out} exists and is not a directory; pick another path")
    out.mkdir(parents=True, exist_ok=True)
    marker = out / GENERATING_MARKER
    with marker.open("w", encoding="utf-8") as fh:
        fh.write(f"tracelab generate (pid {os.getpid()}) has not finished writing this folder\n")
        fh.flush()
        os.fsync(fh.fileno())
    yield
    marker.unlink()


def generate_trace(
    trace: str,
    out: Path,
    *,
    seed: int = 0,
    scale: str = "tiny",
    target_mb: float | None = None,
    part_mb: float | None = None,
    progress: bool = False,
) -> Path:
    """Writes the trace under `out` and returns the path of out/TRUTH.json.

    ``part_mb`` (google-2011 only): raw MB of task_usage per part file instead of one part per
    job batch.
    """
    check_request(trace, scale, target_mb, part_mb)
    out = Path(out)
    with generation(out):
        if trace == "google-2011":
            from tracelab.analysis.synthetic.google2011 import generate_google_2011

            return generate_google_2011(
                out,
                seed=seed,
                scale=scale,
                target_mb=target_mb,
                part_mb=part_mb,
                progress=progress,
            )
        if trace == "alibaba-2018":
            from tracelab.analysis.synthetic.alibaba2018 import generate_alibaba_2018

            return generate_alibaba_2018(out, seed=seed, scale=scale, target_mb=target_mb)
        if trace == "google-2019":
            from tracelab.analysis.synthetic.google2019 import generate_google_2019

            return generate_google_2019(out, seed=seed, scale=scale, target_mb=target_mb)
        # imported lazily: the Azure generator is a separate module with its own owner
        from tracelab.analysis.synthetic.azure2017 import generate_azure_2017

        return generate_azure_2017(
            out, seed=seed, scale=scale, target_mb=target_mb, progress=progress
        )
