"""The mark of a generation in progress, which ingest and ``tracelab run`` must recognise.

The generator (:mod:`tracelab.analysis.synthetic`) writes it; it lives here, beside the lake that
refuses such folders, so that reading raw files never depends on the generator.
"""

from __future__ import annotations

from pathlib import Path

#: written into the output folder before a generation touches anything there and removed after
#: its last file (TRUTH.json): while it exists the folder holds a partial sample, never raw input
GENERATING_MARKER = ".generating"


def partial_sample(folder: Path) -> bool:
    """True when ``folder`` holds a generation that has not finished (killed, or failed)."""
    return (folder / GENERATING_MARKER).exists()
