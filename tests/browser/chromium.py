"""Driving Debian's chromium headless: rendered DOM, console messages, screenshots (offline flags)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)
#: chromium logs page console messages on stderr as INFO:CONSOLE lines
_CONSOLE = re.compile(r":(?:INFO|WARNING|ERROR):CONSOLE[^\]]*\] (.*)$")


@dataclass(frozen=True)
class Rendered:
    dom: str
    console: tuple[str, ...]


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        return subprocess.run(
            [str(CHROMIUM), *_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def render(url: str, timeout: float = 60.0) -> Rendered:
    """The DOM after load and every console message the page produced."""
    proc = _run(["--dump-dom", url], timeout)
    console = tuple(m.group(1) for line in proc.stderr.splitlines() if (m := _CONSOLE.search(line)))
    return Rendered(dom=proc.stdout, console=console)


def screenshot(
    url: str, out: Path, width: int = 1100, height: int = 1600, timeout: float = 60.0
) -> Path:
    """A PNG screenshot of ``url`` written to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _run([f"--screenshot={out}", f"--window-size={width},{height}", url], timeout)
    return out
