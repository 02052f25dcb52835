"""A stage's command line, built from its registry record: options, range checks, input check.

Every field of the stage's parameter dataclass becomes a flag (``--help`` shows its default;
tuples are comma-separated; booleans get ``--x/--no-x``); a value outside the declared range is a
one-line error before anything runs; a missing input names the command that makes it.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracelab.analysis.common.datapaths import stage_results
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import StageResult, element_type, option_spec, out_of_range
from tracelab.flows.registry import (
    ALL,
    STAGES,
    TRACES,
    Stage,
    missing_input,
    stage_runner,
)
from tracelab.flows.scaleout import add_scaleout_arguments, settings_with_scaleout
from tracelab.flows.settings import Settings

if TYPE_CHECKING:
    from tracelab.analysis.common.shortfall import Shortfall


def _parse_scalar(kind: type, text: str) -> Any:
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    return text


def _converter(kind: type, is_tuple: bool) -> Any:
    name = {int: "integers", float: "numbers"}.get(kind, "values")

    def convert(text: str) -> Any:
        try:
            if is_tuple:
                return tuple(_parse_scalar(kind, v.strip()) for v in text.split(",") if v.strip())
            return _parse_scalar(kind, text)
        except ValueError:
            what = f"comma-separated {name}" if is_tuple else name.rstrip("s")
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None

    return convert


def _shown(default: Any) -> str:
    if isinstance(default, tuple):
        return ",".join(str(v) for v in default) or "none"
    return "none" if default in (None, "") else str(default)


def add_params_arguments(parser: argparse.ArgumentParser, params_type: type[Any]) -> None:
    """One flag per :func:`~tracelab.analysis.common.stage_api.option` field of ``params_type``."""
    hints = typing.get_type_hints(params_type)
    for f in dataclasses.fields(params_type):
        spec = option_spec(f)
        if spec is None:
            continue
        flag = spec.flag or "--" + f.name.replace("_", "-")
        kind, is_tuple = element_type(hints[f.name])
        # a help text that already says what the default does needs no "(default: none)"
        text = (
            spec.help if "default" in spec.help else spec.help + f" (default: {_shown(f.default)})"
        )
        if kind is bool:
            parser.add_argument(
                flag,
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=f.default,
                help=text,
            )
            continue
        if spec.choices and not is_tuple:
            parser.add_argument(
                flag, dest=f.name, choices=spec.choices, default=f.default, help=text
            )
            continue
        metavar = "A,B,..." if is_tuple else {int: "N", float: "X"}.get(kind, "VALUE")
        parser.add_argument(
            flag,
            dest=f.name,
            type=_converter(kind, is_tuple),
            default=f.default,
            metavar=metavar,
            help=text,
        )


def params_from_args(params_type: type[Any], args: argparse.Namespace) -> Any:
    """The parameter object from parsed flags; a value out of range is a :class:`TracelabError`."""
    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(params_type)
        if option_spec(f) is not None and hasattr(args, f.name)
    }
    params = params_type(**values)
    problem = out_of_range(params)
    if problem is not None:
        raise TracelabError(problem)
    return params


def configure_stage_parser(parser: argparse.ArgumentParser, stage: Stage) -> None:
    """``--trace`` (the stage's traces), the stage's options and, for a stage whose work can run
    on Dask, the scale-out flags."""
    if stage.traces != (ALL,):
        # help shows the stage's traces; any trace is parsed, so that another one gets the line
        # naming the stages that do run on it
        parser.add_argument(
            "--trace",
            choices=TRACES,
            metavar="{" + ",".join(stage.traces) + "}",
            default=stage.traces[0],
            help="trace to run on (default: %(default)s)",
        )
    add_params_arguments(parser, stage.params_type())
    if stage.scales_out:
        add_scaleout_arguments(parser)


def run_stage_command(stage: Stage, args: argparse.Namespace, settings: Settings) -> int:
    """Check parameters and inputs, run the stage's flow, print its headline numbers."""
    params = params_from_args(stage.params_type(), args)
    trace = getattr(args, "trace", ALL)
    if trace not in stage.traces:
        others = ", ".join(f"`tracelab {s.command}`" for s in STAGES if trace in s.traces)
        raise TracelabError(
            f"`tracelab {stage.command}` runs on {', '.join(stage.traces)}, not {trace}"
            + (f"; the stages for {trace}: {others}" if others else "")
        )
    settings = settings_with_scaleout(args, settings)
    # a stage given its own input file (fit --vmtable) does not need the lake
    missing = (
        None
        if getattr(params, "reads_own_input", False)
        else missing_input(stage, settings.data_dir, trace)
    )
    if missing is not None:
        raise TracelabError(missing)
    shortfall = stage.shortfall(settings.data_dir, trace, params)
    if shortfall is not None:
        # its page says the same; asked for this stage alone, not running it is the answer
        record_shortfall(stage, trace, shortfall, settings.data_dir)
        raise TracelabError(f"not run, not enough data: {shortfall.text}")
    result = stage_runner(stage)(settings, trace, params)
    clear_shortfall_record(stage, trace, settings.data_dir)
    print_result(result, settings.data_dir)
    return 0


def record_shortfall(stage: Stage, trace: str, shortfall: Shortfall, data_dir: Path) -> None:
    """Make the stage's outputs say what it lacked instead of holding results.

    Results folders get only a summary naming the shortfall (what its page shows); an output
    file (the export) is deleted, so no later stage reads what an earlier run wrote from other
    data. A stage whose outputs are not results folders records it in ``results/<trace>/<stage>``.
    """
    from tracelab.analysis.common.shortfall import write_shortfall  # loads Polars: not for --help

    outputs = stage.output_paths(data_dir, trace)
    results = _shortfall_folder(stage, trace, data_dir).parent
    folders = [p for p in outputs if p.parent == results]
    for path in outputs:
        if path not in folders and path.is_file():
            path.unlink()
    for folder in folders or [_shortfall_folder(stage, trace, data_dir)]:
        write_shortfall(folder, shortfall)


def _shortfall_folder(stage: Stage, trace: str, data_dir: Path) -> Path:
    """``results/<trace>/<stage>``: where a stage that writes no results folder records it."""
    return stage_results(stage.name).path(data_dir, trace)


def clear_shortfall_record(stage: Stage, trace: str, data_dir: Path) -> None:
    """Remove a shortfall an earlier run recorded outside the stage's outputs (it ran now)."""
    from tracelab.analysis.common.shortfall import read_shortfall  # loads Polars: not for --help

    record = _shortfall_folder(stage, trace, data_dir)
    if record not in stage.output_paths(data_dir, trace) and read_shortfall(record) is not None:
        shutil.rmtree(record)


def print_result(result: StageResult, data_dir: Path) -> None:
    for label, value in result.headline:
        print(f"  {label}: {value}")
    for out in result.outputs:
        print(f"tracelab {result.stage}: wrote {data_dir / out}")


__all__ = ["TRACES", "configure_stage_parser", "params_from_args", "run_stage_command"]
