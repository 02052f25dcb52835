"""What the generator can be asked for (traces, scales, sizes), checked before any work starts.

Apart from the package's ``__init__`` so that each trace's generator module checks a direct call
the same way without importing the entry point that dispatches to it.
"""

from __future__ import annotations

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.traces import TRACES

#: trace ids the generator knows
GENERATED_TRACES: tuple[str, ...] = tuple(t.id for t in TRACES)


#: the largest --target-mb / --part-mb: 10 TB of CSV, far past the published traces (~200 GB gzip)
MAX_MB = 10_000_000

#: sizes every generator accepts (INTERFACE.md)
SCALES = ("tiny", "small", "medium", "large")


def check_request(
    trace: str, scale: str, target_mb: float | None, part_mb: float | None = None
) -> None:
    """Raise a TracelabError naming the bad argument before any work starts."""
    if trace not in GENERATED_TRACES:
        known = ", ".join(GENERATED_TRACES)
        raise TracelabError(f"unknown trace {trace!r}; the generator knows: {known}")
    if scale not in SCALES:
        raise TracelabError(f"unknown scale {scale!r}; choose one of: {', '.join(SCALES)}")
    for flag, mb in (("--target-mb", target_mb), ("--part-mb", part_mb)):
        # `not > 0` also refuses nan; inf would generate until the disk is full
        if mb is not None and not 0 < mb <= MAX_MB:
            raise TracelabError(f"{flag} must be positive and at most {MAX_MB:,}, got {mb}")
    if part_mb is not None:
        generator = next(t.generator for t in TRACES if t.id == trace)
        if "part_mb" not in generator.takes:
            parted = ", ".join(t.id for t in TRACES if "part_mb" in t.generator.takes)
            raise TracelabError(
                f"--part-mb applies to {parted}'s part files; {trace} is published as one file"
            )
