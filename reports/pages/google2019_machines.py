"""The google-2019 machines page: machines up and their capacity over the window, and the capacity
mix at its start and end, from derive's ``agg_machine_capacity`` and
``agg_machine_capacity_mix`` (machine_events alone suffice: the real cell-a shard is that).

``machine_numbers`` computes everything the page states from the two tables (pure); the figure
functions draw; ``google2019_machines_sections`` composes the prose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from tracelab.analysis.common.datapaths import derived_table
from tracelab.analysis.traces import google2019
from tracelab.reports.figures import new_axes
from tracelab.reports.frames import collect, floats, scan, series_on_grid
from tracelab.reports.model import (
    Figure,
    HtmlTable,
    NotEnoughData,
    Number,
    PageContext,
    PageSpec,
    Section,
)
from tracelab.reports.numfmt import fmt, fmt_int, fmt_pct

_US_PER_DAY = 86_400_000_000
_CAPACITY = ("time", "adds", "removes", "updates", "machines", "cpus_total", "memory_total")
_MIX = ("snapshot", "cpus", "memory", "machines")
_SNAPSHOTS = ("window_start", "window_end")
#: capacity pairs drawn: the most common ones, the rest summed in the table's last row
_TOP_PAIRS = 12
_PAPER = (
    "No paper is reproduced here. Google's cluster-data colab of the v3 traces shows the same "
    "capacity mix (machines per CPU × memory capacity, both normalised so the largest machine "
    "is 1); Tirmazi et al. 2020 (“Borg: the next generation”) describe cells of mixed machine "
    "shapes with capacity changing over the month."
)


@dataclass(frozen=True)
class MachineNumbers:
    """What the page states about the cell's machines."""

    machines_start: int
    machines_end: int
    machines_max: int
    adds: int
    removes: int
    updates: int
    days: float
    #: machines up at the end whose capacity no event gave
    without_capacity_end: int
    cpus_end: float
    memory_end: float
    #: (cpus, memory, machines at the start, machines at the end), most machines at the end first
    pairs: tuple[tuple[float | None, float | None, int, int], ...]


def machine_numbers(capacity: pl.DataFrame, mix: pl.DataFrame) -> MachineNumbers:
    """From the capacity series (one row per machine_events timestamp; time 0 holds the machines
    present before the window) and the capacity mix at ``window_start`` and ``window_end``."""
    if capacity.height == 0:
        raise NotEnoughData("agg_machine_capacity: needs ≥ 1 row; found 0")
    inside = capacity.filter(pl.col("time") > 0)
    last = capacity.sort("time").tail(1)
    span = int(inside.select(pl.col("time").max()).item() or 0)
    wide = mix.pivot(on="snapshot", index=["cpus", "memory"], values="machines")
    snapshots = [
        pl.col(c).fill_null(0) if c in wide.columns else pl.lit(0).alias(c) for c in _SNAPSHOTS
    ]
    pairs = wide.with_columns(snapshots).sort(
        "window_end", "cpus", "memory", descending=[True, False, False], nulls_last=True
    )
    at_end = mix.filter(pl.col("snapshot") == "window_end")
    at_start = mix.filter(pl.col("snapshot") == "window_start")
    return MachineNumbers(
        machines_start=int(at_start["machines"].sum()),
        machines_end=int(at_end["machines"].sum()),
        machines_max=int(capacity.select(pl.col("machines").max()).item() or 0),
        adds=int(inside["adds"].sum()),
        removes=int(inside["removes"].sum()),
        updates=int(inside["updates"].sum()),
        days=span / _US_PER_DAY,
        without_capacity_end=int(
            last["machines_without_capacity"][0] if "machines_without_capacity" in last else 0
        ),
        cpus_end=float(last["cpus_total"][0]),
        memory_end=float(last["memory_total"][0]),
        pairs=tuple(
            (r["cpus"], r["memory"], int(r["window_start"]), int(r["window_end"]))
            for r in pairs.iter_rows(named=True)
        ),
    )


def google2019_machines_sections(ctx: PageContext) -> Sequence[Section]:
    """Machines over time, then the capacity mix."""
    lf = scan(ctx.derived("agg_machine_capacity"), _CAPACITY)
    mix = collect(scan(ctx.derived("agg_machine_capacity_mix"), _MIX).select(_MIX))
    capacity = collect(lf)
    nums = machine_numbers(capacity, mix)
    return (
        Section(
            title="Machines and capacity over the window",
            this_run=(
                Number("machines_start", float(nums.machines_start), ",.0f"),
                " machines were up at the window's start and ",
                Number("machines_end", float(nums.machines_end), ",.0f"),
                " at its end (at most ",
                Number("machines_max", float(nums.machines_max), ",.0f"),
                f"); over {fmt(nums.days)} days of machine_events, ",
                Number("machine_adds", float(nums.adds), ",.0f"),
                " ADDs, ",
                Number("machine_removes", float(nums.removes), ",.0f"),
                " REMOVEs and ",
                Number("machine_updates", float(nums.updates), ",.0f"),
                " capacity UPDATEs. At the end the cell holds ",
                Number("cpus_end", nums.cpus_end),
                " CPU and ",
                Number("memory_end", nums.memory_end),
                " memory in units of the largest machine's; ",
                Number("without_capacity_end", float(nums.without_capacity_end), ",.0f"),
                " machines up then have no capacity in the data (an ADD with a blank capacity) "
                "and are left out of the totals."
                + ("" if nums.days > 0 else " No machine event lies inside the window."),
            ),
            paper=_PAPER,
            # with no event inside the window there is no series to draw, only its start
            figures=tuple(_series_figure(lf, ctx.out_dir)) if nums.days > 0 else (),
        ),
        Section(
            title="Capacity mix (machines per CPU × memory capacity)",
            this_run=(
                Number("capacity_pairs", float(len(nums.pairs)), ",.0f"),
                " distinct (CPU, memory) capacities among the machines up at the start or the "
                "end; capacities are normalised (the largest machine's CPU or memory is 1).",
            ),
            paper=_PAPER,
            figures=tuple(_mix_figure(nums.pairs, ctx.out_dir)),
            tables=(_mix_table(nums),),
        ),
    )


def _pair(cpus: float | None, memory: float | None) -> str:
    return "unknown" if cpus is None or memory is None else f"{fmt(cpus)} × {fmt(memory)}"


def _mix_table(nums: MachineNumbers) -> HtmlTable:
    shown = nums.pairs[:_TOP_PAIRS]
    rest = nums.pairs[_TOP_PAIRS:]
    rows = [
        (
            _pair(c, m),
            fmt_int(s),
            fmt_int(e),
            fmt_pct(e / nums.machines_end if nums.machines_end else None),
        )
        for c, m, s, e in shown
    ]
    if rest:
        start, end = sum(p[2] for p in rest), sum(p[3] for p in rest)
        share = end / nums.machines_end if nums.machines_end else None
        other = "1 other capacity" if len(rest) == 1 else f"{len(rest)} other capacities"
        rows.append((other, fmt_int(start), fmt_int(end), fmt_pct(share)))
    return HtmlTable(
        "Machines per capacity (CPU × memory, normalised)",
        ("capacity", "machines at start", "machines at end", "share at end"),
        tuple(rows),
    )


def _series_figure(lf: pl.LazyFrame, out: Path) -> list[Figure]:
    series = series_on_grid(
        lf.filter(pl.col("time") > 0), "time", ["machines", "cpus_total", "memory_total"]
    )
    days = floats(series, "time") / _US_PER_DAY
    with new_axes(
        out,
        "machines_over_time",
        alt="Machines up over the window (top) and their total normalised CPU and memory (bottom).",
        caption="Machines up (top) and total capacity in units of the largest machine (bottom), "
        "by day of the window.",
        nrows=2,
        size=(7.0, 5.2),
    ) as (axes, figs):
        top, bottom = axes[0][0], axes[1][0]
        top.step(days, floats(series, "machines"), where="post", label="machines up")
        top.set_ylabel("machines up")
        bottom.step(days, floats(series, "cpus_total"), where="post", label="CPU (normalised)")
        bottom.step(days, floats(series, "memory_total"), where="post", label="memory (normalised)")
        bottom.set_ylabel("total capacity (normalised)")
        for ax in (top, bottom):
            ax.set_xlabel("day of the window")
            ax.legend(fontsize=9)
    return figs


def _mix_figure(
    pairs: Sequence[tuple[float | None, float | None, int, int]], out: Path
) -> list[Figure]:
    shown = list(pairs[:_TOP_PAIRS])[::-1]  # most common at the top
    labels = [_pair(c, m) for c, m, _, _ in shown]
    y = np.arange(len(shown), dtype=np.float64)
    with new_axes(
        out,
        "capacity_mix",
        alt="Machines per CPU × memory capacity at the window's start and end.",
        caption=f"Machines per capacity (CPU × memory, normalised), the {len(shown)} most "
        "common at the end, at the window's start and end.",
        margins={"left": 0.24},
        data=(
            ("capacity (CPU × memory, normalised)", "machines at start", "machines at end"),
            [(_pair(c, m), s, e) for c, m, s, e in pairs],
        ),
    ) as (ax, figs):
        ax.barh(y + 0.2, [p[2] for p in shown], height=0.4, label="window start", color="#9ab")
        ax.barh(y - 0.2, [p[3] for p in shown], height=0.4, label="window end", color="#24323f")
        ax.set_yticks(y, labels, fontsize=9)
        ax.set_xlabel("machines")
        ax.set_ylabel("capacity (CPU × memory)")
        ax.legend(fontsize=9)
    return figs


#: this module's pages (their stage orders them among the others)
PAGES = (
    PageSpec(
        f"{google2019.ID}-machines",
        f"Machines and capacity of {google2019.ID}",
        google2019.ID,
        "derive",
        (
            derived_table("agg_machine_capacity").relative(google2019.ID),
            derived_table("agg_machine_capacity_mix").relative(google2019.ID),
        ),
        f"tracelab derive --trace {google2019.ID}",
        google2019_machines_sections,
    ),
)
