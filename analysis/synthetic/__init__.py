"""Seeded synthetic traces in the exact published formats, with their true parameters.

``generate_trace`` is the one entry point; each trace has its own module
(:mod:`analysis.synthetic.google2011`, :mod:`analysis.synthetic.azure2017`).
"""

from __future__ import annotations

from pathlib import Path

from tracelab.analysis.common.errors import TracelabError

#: trace ids the generator knows
GENERATED_TRACES = ("google-2011", "azure-2017")


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
    if target_mb is not None and not target_mb > 0:
        raise TracelabError(f"--target-mb must be positive, got {target_mb}")
    if part_mb is not None and not part_mb > 0:
        raise TracelabError(f"--part-mb must be positive, got {part_mb}")
    if part_mb is not None and trace != "google-2011":
        raise TracelabError(
            f"--part-mb applies to google-2011's part files; {trace} is published as one file"
        )


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
    if trace == "google-2011":
        from tracelab.analysis.synthetic.google2011 import generate_google_2011

        return generate_google_2011(
            Path(out),
            seed=seed,
            scale=scale,
            target_mb=target_mb,
            part_mb=part_mb,
            progress=progress,
        )
    if trace == "azure-2017":
        # imported lazily: the Azure generator is a separate module with its own owner
        from tracelab.analysis.synthetic.azure2017 import generate_azure_2017

        return generate_azure_2017(
            Path(out), seed=seed, scale=scale, target_mb=target_mb, progress=progress
        )
    raise AssertionError(trace)  # unreachable: check_request knows every trace
