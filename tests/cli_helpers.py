"""Running `tracelab` in the test process, through its real entry point."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

from tracelab.flows.cli import main


def tracelab_output(*args: str) -> tuple[int, str]:
    """The exit status of ``tracelab ARGS`` and everything it printed (stdout and stderr)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = main(list(args))
    return rc, out.getvalue()


@dataclass(frozen=True)
class TinyPipeline:
    """A data directory after one `tracelab run --scale tiny`, and what that run printed."""

    data: Path
    stdout: str


def run_tiny(data: Path) -> str:
    """`tracelab run` on the tiny generated sample of every trace into ``data``; its stdout."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["run", "--data", str(data), "--scale", "tiny", "--seed", "3"])
    assert rc == 0, out.getvalue()
    return out.getvalue()
