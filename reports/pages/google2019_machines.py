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
_PAPER = (
    "No paper is reproduced here. Google's cluster-data colab of the v3 traces shows the same "
    "capacity mix (machines per CPU × memory capacity, both normalised so the largest machine "
    "is 1); Tirmazi et al. 2020 (“Borg: the next generation”) describe cells of mixed machine "
    "shapes with capacity changing over the month."
)


@dataclass(frozen=True)
class MachineNumbers:
    """What the page states about the cell's machines (``agg_machine_capacity_summary`` and
    ``agg_machine_capacity_pairs``)."""

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
    #: (cpus, memory, machines at the start, machines at the end, share at the end) of every
    #: capacity, most machines at the end first
    pairs: tuple[tuple[float | None, float | None, int, int, float | None], ...]
    #: every capacity, and the first ones listed one by one (the table and the figure's bars)
    capacity_pairs: int = 0
    listed: int = 0
    #: the capacities not listed one by one: how many, machines at the start and end, share at end
    other: tuple[int, int, int, float | None] = (0, 0, 0, None)


def machine_numbers(summary: pl.DataFrame, pairs: pl.DataFrame) -> MachineNumbers:
    """The one row of ``agg_machine_capacity_summary`` and the listed rows of
    ``agg_machine_capacity_pairs``; :class:`NotEnoughData` when the capacity series is empty."""
    row = summary.row(0, named=True)
    if row["capacity_rows"] == 0:
        raise NotEnoughData("agg_machine_capacity: needs ≥ 1 row; found 0")
    ranked = pairs.sort("rank")
    return MachineNumbers(
        machines_start=int(row["machines_start"]),
        machines_end=int(row["machines_end"]),
        machines_max=int(row["machines_max"]),
        adds=int(row["adds"]),
        removes=int(row["removes"]),
        updates=int(row["updates"]),
        days=float(row["days"]),
        without_capacity_end=int(row["without_capacity_end"]),
        cpus_end=float(row["cpus_end"]),
        memory_end=float(row["memory_end"]),
        pairs=tuple(
            (
                r["cpus"],
                r["memory"],
                int(r["machines_start"]),
                int(r["machines_end"]),
                r["share_end"],
            )
            for r in ranked.iter_rows(named=True)
        ),
        capacity_pairs=int(row["capacity_pairs"]),
        listed=int(ranked["shown"].sum()),
        other=(
            int(row["other_pairs"]),
            int(row["other_machines_start"]),
            int(row["other_machines_end"]),
            row["other_share_end"],
        ),
    )


def google2019_machines_sections(ctx: PageContext) -> Sequence[Section]:
    """Machines over time, then the capacity mix."""
    nums = machine_numbers(
        collect(scan(ctx.derived("agg_machine_capacity_summary"))),
        collect(scan(ctx.derived("agg_machine_capacity_pairs"))),
    )
    lf = scan(ctx.derived("agg_machine_capacity"), _CAPACITY)
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
                Number("capacity_pairs", float(nums.capacity_pairs), ",.0f"),
                " distinct (CPU, memory) capacities among the machines up at the start or the "
                "end; capacities are normalised (the largest machine's CPU or memory is 1).",
            ),
            paper=_PAPER,
            figures=tuple(_mix_figure(nums, ctx.out_dir)),
            tables=(_mix_table(nums),),
        ),
    )


def _pair(cpus: float | None, memory: float | None) -> str:
    return "unknown" if cpus is None or memory is None else f"{fmt(cpus)} × {fmt(memory)}"


def _mix_table(nums: MachineNumbers) -> HtmlTable:
    rows = [
        (_pair(c, m), fmt_int(s), fmt_int(e), fmt_pct(share))
        for c, m, s, e, share in nums.pairs[: nums.listed]
    ]
    n_other, start, end, share = nums.other
    if n_other:
        other = "1 other capacity" if n_other == 1 else f"{n_other} other capacities"
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


def _mix_figure(nums: MachineNumbers, out: Path) -> list[Figure]:
    pairs = nums.pairs
    shown = list(pairs[: nums.listed])[::-1]  # most common at the top
    labels = [_pair(c, m) for c, m, *_ in shown]
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
            [(_pair(c, m), s, e) for c, m, s, e, _ in pairs],
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
            derived_table("agg_machine_capacity_pairs").relative(google2019.ID),
            derived_table("agg_machine_capacity_summary").relative(google2019.ID),
        ),
        f"tracelab derive --trace {google2019.ID}",
        google2019_machines_sections,
    ),
)
