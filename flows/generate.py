"""`tracelab generate`: a seeded synthetic trace in the exact published format, plus TRUTH.json.

A plain function around :func:`analysis.synthetic.generate_trace` (``tracelab run`` wraps it in a
Prefect flow); the generator itself streams job batches to part files, so this module only wires
parameters and reports the result.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from tracelab.analysis.common.stage_api import number_arg
from tracelab.analysis.synthetic.request import GENERATED_TRACES, MAX_MB, SCALES, check_request
from tracelab.analysis.traces import TRACES
from tracelab.flows.lock import LOCK_NAME, data_dir_lock
from tracelab.flows.settings import Settings

#: the built-in default sample's size, the same for `generate` and `run`
DEFAULT_SCALE = "small"


def generate_sample(
    trace: str = GENERATED_TRACES[0],
    out: str = f"data/raw/{GENERATED_TRACES[0]}",
    seed: int = 0,
    scale: str = "small",
    target_mb: float | None = None,
    part_mb: float | None = None,
    progress: bool = False,
) -> str:
    """Write every table of a synthetic ``trace`` under ``out``; returns the path of its
    TRUTH.json."""
    from tracelab.analysis.synthetic import generate_trace

    return str(
        generate_trace(
            trace,
            Path(out),
            seed=seed,
            scale=scale,
            target_mb=target_mb,
            part_mb=part_mb,
            progress=progress,
        )
    )


#: the traces published in part files, whose generator takes --part-mb
PARTED = ", ".join(t.id for t in TRACES if "part_mb" in t.generator.takes)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace",
        choices=GENERATED_TRACES,
        default=GENERATED_TRACES[0],
        help="trace to generate (default: %(default)s)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output root (default: DATA/raw/<trace>); earlier part files and TRUTH there are replaced",
    )
    parser.add_argument(
        "--seed", type=number_arg(int, 0), default=0, help="random seed (default: 0)"
    )
    parser.add_argument(
        "--scale",
        choices=SCALES,
        default=DEFAULT_SCALE,
        help="size; small is the built-in default sample (default: %(default)s)",
    )
    parser.add_argument(
        "--target-mb",
        type=number_arg(float, 0, MAX_MB),
        default=None,
        help="keep generating job batches until the uncompressed CSV reaches about N MB (10^6 B)",
    )
    parser.add_argument(
        "--part-mb",
        type=number_arg(float, 0, MAX_MB),
        default=None,
        help=f"{PARTED}: close each part file once its task_usage part holds about N raw MB "
        "(the published parts hold ~350); default: one part per job batch",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    # fail on a bad argument before any file is written
    check_request(args.trace, args.scale, args.target_mb, args.part_mb)
    out: Path = args.out if args.out is not None else settings.raw_dir / args.trace
    owner = owning_data_dir(out)
    with contextlib.ExitStack() as stack:
        if owner is not None and owner.resolve() != settings.data_dir.resolve():
            # --out inside another data directory: a run there must not ingest a half-written
            # sample, so that directory's lock is held too (ours is held by the CLI)
            wait = getattr(args, "wait", 0.0)
            stack.enter_context(data_dir_lock(owner, "tracelab generate --out", wait_seconds=wait))
        truth = generate_sample(
            trace=args.trace,
            out=str(out),
            seed=args.seed,
            scale=args.scale,
            target_mb=args.target_mb,
            part_mb=args.part_mb,
            progress=not args.quiet,
        )
    print(f"wrote {args.trace} (seed {args.seed}, scale {args.scale}) to {out}: {_rows(truth)}")
    print(f"truth: {truth}")
    return 0


def owning_data_dir(out: Path) -> Path | None:
    """The data directory ``out`` lies in, or None: the nearest folder holding a data
    directory's lock file, or the parent of a ``raw`` folder on the way up."""
    path = out.absolute()
    for folder in (path, *path.parents):
        if (folder / LOCK_NAME).exists():
            return folder
        if folder.name == "raw" and folder != path:
            return folder.parent
    return None


def _rows(truth: str) -> str:
    """``table rows, ...`` from TRUTH.json when it lists tables with row counts."""
    tables = json.loads(Path(truth).read_text()).get("tables")
    if not isinstance(tables, dict):
        return "done"
    rows = {k: v.get("rows") for k, v in tables.items() if isinstance(v, dict)}
    return ", ".join(f"{k} {n:,}" for k, n in rows.items() if isinstance(n, int)) or "done"
