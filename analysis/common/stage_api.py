"""What a stage's computation is given: typed options, a progress callback and a map for scale-out.

A stage's parameters are one frozen dataclass whose fields are declared with :func:`option`; the
stage registry (``flows/registry.py``) turns each field into a CLI flag (help, default, range,
choices) and each instance into the flow's typed parameter object. The computation itself is a
plain function of those parameters that reports progress through a :class:`Progress` and runs
its independent pieces of work through a :data:`MapFn` (serial here, a Dask client's ``map`` on
a cluster), so the same function gives the same tables on one machine and on many. What one run
of a stage did comes back as a :class:`StageResult`, whichever layer ran it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: the longest simulated or look-ahead horizon an option takes: a century, far past any trace,
#: short of where float hours lose their precision
MAX_HOURS = 876_000.0

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
class StageResult:
    """What one run of a stage did: the headline numbers a user (and Prefect's UI) sees first."""

    stage: str
    trace: str
    outputs: tuple[str, ...]
    #: (label, formatted value) pairs, in reading order
    headline: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0
    #: the parts the stage left out for lack of data (``<part>: needs …; found …``)
    shortfalls: tuple[str, ...] = ()
    #: the report page to open for these numbers (a slug), if the stage has one on this trace
    page: str | None = None


@dataclass(frozen=True)
class OptionSpec:
    """How one parameter appears on the command line."""

    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    #: the flag's name when it is not ``--<field-name-with-dashes>``
    flag: str | None = None
    #: a list option that means something when empty (its help says what); any other list
    #: option needs at least one value
    allow_empty: bool = False


def option(
    default: Any,
    help: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: Iterable[str] | None = None,
    flag: str | None = None,
    allow_empty: bool = False,
) -> Any:
    """A dataclass field that is also a CLI option (tuples become comma-separated lists).

    ``minimum``/``maximum`` bound every element (inclusive); a value outside them is refused with
    a one-line error before any work starts, and so is an empty list unless ``allow_empty``
    (for a list whose emptiness means something, said in its help).
    """
    spec = OptionSpec(
        help, minimum, maximum, tuple(choices) if choices else None, flag, allow_empty
    )
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
    """The first option of ``params`` that cannot run, as a sentence; None when all can.

    One check for every stage: an empty list where the stage needs values, a choice outside its
    list, a number that is not finite (nan and inf pass every comparison, so they are refused
    before the bounds), a number outside its declared range, then what the parameters say of
    their combination (an ``options_problem()`` method, when they have one), then options whose
    combined memory estimate exceeds the machine's (:func:`memory_problem`).
    """
    for f in dataclasses.fields(params):  # type: ignore[arg-type]
        spec = option_spec(f)
        if spec is None:
            continue
        value = getattr(params, f.name)
        values = value if isinstance(value, tuple) else (value,)
        flag = spec.flag or "--" + f.name.replace("_", "-")
        if value == () and not spec.allow_empty:
            return f"{flag} is empty: give at least one value (default: {_listed(f.default)})"
        for v in values:
            problem = _value_problem(flag, v, spec)
            if problem is not None:
                return problem
    combination = getattr(params, "options_problem", None)
    problem = combination() if combination is not None else None
    return problem if problem is not None else memory_problem(params)


def _listed(default: object) -> str:
    return ",".join(str(v) for v in default) if isinstance(default, tuple) else str(default)


def _value_problem(flag: str, v: object, spec: OptionSpec) -> str | None:
    if spec.choices is not None and str(v) not in spec.choices:
        return f"{flag} {v}: must be one of {', '.join(spec.choices)}"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return f"{flag} {v}: must be a finite number"
    if spec.minimum is not None and v < spec.minimum:
        return f"{flag} {v}: must be at least {_bound(spec.minimum)}"
    if spec.maximum is not None and v > spec.maximum:
        return f"{flag} {v}: must be at most {_bound(spec.maximum)}"
    return None


def _bound(x: float) -> str:
    """A bound as people write it: 1000000 rather than 1e+06, 0.01 as it is."""
    return f"{int(x)}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def number_arg(
    kind: type[int] | type[float], minimum: float | None = None, maximum: float | None = None
) -> Callable[[str], Any]:
    """An argparse ``type`` for the numeric flags outside stage parameters (``--wait``,
    ``--chunk-mb``, ``--max-rows`` …): the same finite-and-in-range rule as :func:`out_of_range`,
    reported by the parser in one line."""
    import argparse

    spec = OptionSpec("", minimum, maximum)

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        problem = _value_problem("", value, spec)
        if problem is not None:
            # the value as typed (-3, not -3.0), then why
            raise argparse.ArgumentTypeError(f"{text}: {problem.split(': ', 1)[1]}")
        return value

    return parse


class MemoryEstimate(Protocol):
    """Parameters whose memory grows with their values say how much they will need."""

    def memory_estimate(self) -> tuple[int, str]:
        """(bytes at the peak, the flags that drive it)."""
        ...


#: share of the machine's physical memory a stage may plan to use
MEMORY_SHARE = 0.75


def memory_budget() -> int:
    """Bytes a stage may plan for: :data:`MEMORY_SHARE` of this machine's physical memory."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * MEMORY_SHARE)


def memory_problem(params: object) -> str | None:
    """A sentence when the options' memory estimate exceeds :func:`memory_budget`, else None.

    Refused before any work starts, instead of growing until the kernel kills the process.
    """
    if not hasattr(params, "memory_estimate"):
        return None
    need, flags = typing.cast(MemoryEstimate, params).memory_estimate()
    budget = memory_budget()
    if need <= budget:
        return None
    return (
        f"these options need about {need / 1e9:,.1f} GB of memory, more than the "
        f"{budget / 1e9:,.1f} GB allowed ({MEMORY_SHARE:.0%} of this machine's); lower {flags}"
    )


def element_type(annotation: Any) -> tuple[type, bool]:
    """``(scalar type, is_tuple)`` of a field annotation such as ``int`` or ``tuple[float, ...]``."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return typing.get_args(annotation)[0], True
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return element_type(inner[0])
    return annotation, False
