"""What a stage's computation is given: typed options, a progress callback and a map for scale-out.

A stage's parameters are one frozen dataclass whose fields are declared with :func:`option`; the
stage registry (``flows/registry.py``) turns each field into a CLI flag (help, default, range,
choices) and each instance into the flow's typed parameter object. The computation itself is a
plain function of those parameters that reports progress through a :class:`Progress` and runs
its independent pieces of work through a :data:`MapFn` (serial here, a Dask client's ``map`` on
a cluster), so the same function gives the same tables on one machine and on many.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: ``map_fn(function, items) -> results`` in the order of ``items``
MapFn = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]


def serial_map(function: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """The single-process :data:`MapFn`."""
    return [function(item) for item in items]


class Progress(Protocol):
    """``progress(done, total, what)``: ``done`` of ``total`` units of ``what`` are finished."""

    def __call__(self, done: int, total: int, what: str) -> None: ...


def no_progress(done: int, total: int, what: str) -> None:
    """A :class:`Progress` that shows nothing (tests, library use)."""


@dataclass(frozen=True)
class OptionSpec:
    """How one parameter appears on the command line."""

    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    #: the flag's name when it is not ``--<field-name-with-dashes>``
    flag: str | None = None


def option(
    default: Any,
    help: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: Iterable[str] | None = None,
    flag: str | None = None,
) -> Any:
    """A dataclass field that is also a CLI option (tuples become comma-separated lists).

    ``minimum``/``maximum`` bound every element (inclusive); a value outside them is refused with
    a one-line error before any work starts.
    """
    spec = OptionSpec(help, minimum, maximum, tuple(choices) if choices else None, flag)
    if isinstance(default, list | dict | set):
        raise TypeError("option defaults must be immutable (use a tuple)")
    return field(default=default, metadata={"option": spec})


def option_spec(f: dataclasses.Field[Any]) -> OptionSpec | None:
    """The :class:`OptionSpec` of a field declared with :func:`option`, else None."""
    spec = f.metadata.get("option")
    return spec if isinstance(spec, OptionSpec) else None


def option_values(params: object) -> dict[str, Any]:
    """Every option of ``params`` (a stage's parameter dataclass) with the value it ran with,
    defaults included, in declaration order: what the stage's summary records."""
    return {
        f.name: getattr(params, f.name)
        for f in dataclasses.fields(params)  # type: ignore[arg-type]
        if option_spec(f) is not None
    }


def out_of_range(params: object) -> str | None:
    """The first option of ``params`` outside its declared range or choices, as a sentence."""
    for f in dataclasses.fields(params):  # type: ignore[arg-type]
        spec = option_spec(f)
        if spec is None:
            continue
        value = getattr(params, f.name)
        values = value if isinstance(value, tuple) else (value,)
        flag = spec.flag or "--" + f.name.replace("_", "-")
        for v in values:
            if spec.choices is not None and str(v) not in spec.choices:
                return f"{flag} {v}: must be one of {', '.join(spec.choices)}"
            if isinstance(v, bool) or not isinstance(v, int | float):
                continue
            if spec.minimum is not None and v < spec.minimum:
                return f"{flag} {v}: must be at least {spec.minimum:g}"
            if spec.maximum is not None and v > spec.maximum:
                return f"{flag} {v}: must be at most {spec.maximum:g}"
    return None


def element_type(annotation: Any) -> tuple[type, bool]:
    """``(scalar type, is_tuple)`` of a field annotation such as ``int`` or ``tuple[float, ...]``."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return typing.get_args(annotation)[0], True
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return element_type(inner[0])
    return annotation, False
