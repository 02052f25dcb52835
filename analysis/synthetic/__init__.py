"""Seeded synthetic traces in the exact published formats, with their true parameters.

``generate_trace`` is the one entry point; each trace's declaration (:mod:`analysis.traces`)
names its generator module here.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.generating import GENERATING_MARKER
from tracelab.analysis.synthetic.request import check_request
from tracelab.analysis.traces import trace_spec


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
    """Writes the trace under `out` with the generator its declaration names; returns the path
    of out/TRUTH.json.

    ``part_mb`` (traces published in part files): raw MB of the largest table per part file.
    """
    check_request(trace, scale, target_mb, part_mb)
    generator = trace_spec(trace).generator
    module, function = generator.entry.split(":")
    optional = {"target_mb": target_mb, "part_mb": part_mb, "progress": progress}
    kwargs = {k: v for k, v in optional.items() if k in generator.takes}
    out = Path(out)
    with generation(out):
        # imported only now: each generator is a large module of its own
        generate = getattr(importlib.import_module(module), function)
        return Path(generate(out, seed=seed, scale=scale, **kwargs))
