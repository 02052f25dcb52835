"""Running `tracelab` in the test process, through its real entry point."""

from __future__ import annotations

import contextlib
import io

from tracelab.flows.cli import main


def tracelab_output(*args: str) -> tuple[int, str]:
    """The exit status of ``tracelab ARGS`` and everything it printed (stdout and stderr)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = main(list(args))
    return rc, out.getvalue()
