"""``tracelab run --config FILE``: one TOML file sets any stage's options (docs/run-config.md).

A table per stage, named by the stage or its command, holding the stage's options by field
name (``max_failures``) or flag name (``max-failures``)::

    [packing]
    max_failures = 10

Every value is checked as the command line checks it (type, range, choices), before anything
runs; an unknown stage or option is a one-line error naming the file and the known names.
The file is read once, before the data directory's lock is taken (``tracelab run`` reads it as
its arguments are parsed), and only if it is a regular file of at most :data:`MAX_CONFIG_BYTES`
of UTF-8 text: a device, a FIFO or a huge file is refused, not read until memory runs out or a
writer appears while the lock is held.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import stat
import tomllib
import typing
from pathlib import Path
from typing import Any

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import element_type, option_spec, out_of_range
from tracelab.flows.registry import STAGES, Stage, stage_named


class StageOptions(dict[str, Any]):
    """Stage name -> its options object. A stage not set reads as its defaults, made when first
    read: a run that looks at a few stages' options (one trace, nothing changed) loads only
    their options classes."""

    def __missing__(self, name: str) -> Any:
        value = stage_named(name).params_type()()
        self[name] = value
        return value


#: a run config is a few dozen lines; anything larger is not one
MAX_CONFIG_BYTES = 1_000_000


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A ``--config`` file, read and checked: its path and every stage's options."""

    path: Path
    options: StageOptions


def default_stage_options() -> StageOptions:
    """Every registry stage's options at their defaults."""
    return StageOptions({s.name: s.params_type()() for s in STAGES})


def stage_options_from_config(path: Path | None) -> StageOptions:
    """Every stage's options: the defaults, overridden by the tables of the TOML file at ``path``."""
    options = default_stage_options()
    if path is None:
        return options
    try:
        doc = tomllib.loads(config_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise TracelabError(f"--config {path}: not valid TOML ({exc})") from None
    seen: dict[str, str] = {}
    for key, table in doc.items():
        stage = _stage_of(path, key)
        if stage.name in seen:
            raise TracelabError(
                f"--config {path}: [{seen[stage.name]}] and [{key}] both set {stage.name}; "
                "keep one table"
            )
        seen[stage.name] = key
        if not isinstance(table, dict):
            raise TracelabError(f"--config {path}: [{key}] must be a table of options")
        options[stage.name] = _options_of(path, stage, table)
    return options


def config_text(path: Path) -> str:
    """The text of the config file at ``path``; a one-line :class:`TracelabError` unless it is
    a regular file of at most :data:`MAX_CONFIG_BYTES` of UTF-8 (a BOM is dropped)."""
    try:
        # O_NONBLOCK: opening a FIFO waits for a writer without it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise TracelabError(f"--config {path}: cannot read it ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TracelabError(
            f"--config {path}: not a regular file (a folder, device, FIFO or socket); "
            "give the path of a TOML file"
        )
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise TracelabError(f"--config {path}: cannot read it ({exc.strerror})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise TracelabError(
            f"--config {path}: larger than {MAX_CONFIG_BYTES:,} bytes, not a run config; "
            "give the TOML file of stage options (docs/run-config.md)"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TracelabError(
            f"--config {path}: byte {exc.start} is not UTF-8; save the file as UTF-8"
        ) from None


def read_run_config(text: str) -> RunConfig:
    """The ``--config`` argument's type: the file read and checked as the arguments are parsed,
    so a bad file is refused before anything runs or locks the data directory."""
    path = Path(text)
    try:
        return RunConfig(path, stage_options_from_config(path))
    except TracelabError as exc:
        # argparse names the flag itself
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--config ")) from None


def _stage_of(path: Path, key: str) -> Stage:
    try:
        return stage_named(key)
    except KeyError:
        known = ", ".join(s.name for s in STAGES)
        raise TracelabError(f"--config {path}: no stage [{key}]; stages: {known}") from None


def _options_of(path: Path, stage: Stage, table: dict[str, Any]) -> Any:
    kind = stage.params_type()
    hints = typing.get_type_hints(kind)
    fields = {f.name: f for f in dataclasses.fields(kind) if option_spec(f) is not None}
    values: dict[str, Any] = {}
    for raw_name, value in table.items():
        name = raw_name.replace("-", "_")
        if name not in fields:
            known = ", ".join(sorted(fields))
            raise TracelabError(
                f"--config {path}: [{stage.name}] has no option {raw_name!r}; options: {known}"
            )
        values[name] = _typed(path, stage, name, hints[name], value)
    options = kind(**values)
    problem = out_of_range(options)
    if problem is not None:
        raise TracelabError(f"--config {path}: [{stage.name}] {problem}")
    return options


def _typed(path: Path, stage: Stage, name: str, annotation: Any, value: Any) -> Any:
    scalar, is_tuple = element_type(annotation)
    items = value if isinstance(value, list) else [value]
    if not is_tuple and isinstance(value, list):
        raise TracelabError(f"--config {path}: [{stage.name}] {name} takes one value, not a list")
    converted = [_scalar(path, stage, name, scalar, v) for v in items]
    return tuple(converted) if is_tuple else converted[0]


def _scalar(path: Path, stage: Stage, name: str, kind: type, value: Any) -> Any:
    # TOML's own types are kept; an int where a float is wanted widens, nothing else converts
    ok = (
        (kind is bool and isinstance(value, bool))
        or (kind is int and isinstance(value, int) and not isinstance(value, bool))
        or (kind is float and isinstance(value, int | float) and not isinstance(value, bool))
        or (kind is str and isinstance(value, str))
    )
    if not ok:
        raise TracelabError(
            f"--config {path}: [{stage.name}] {name} = {value!r} must be {kind.__name__}"
        )
    return float(value) if kind is float else value


def changed_options(options: StageOptions) -> dict[str, dict[str, Any]]:
    """Per stage, the options that differ from their defaults (what a config file changed)."""
    out: dict[str, dict[str, Any]] = {}
    for name, value in options.items():
        default = stage_named(name).params_type()()
        diff = {
            f.name: getattr(value, f.name)
            for f in dataclasses.fields(value)
            if getattr(value, f.name) != getattr(default, f.name)
        }
        if diff:
            out[name] = diff
    return out


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` (``tracelab run`` and ``tracelab schedule``): a :class:`RunConfig`."""
    parser.add_argument(
        "--config",
        type=read_run_config,
        default=None,
        metavar="FILE",
        help="TOML file setting any stage's options, e.g. [packing] max_failures = 10 "
        "(docs/run-config.md)",
    )
