"""Matplotlib on the Agg backend: figures saved as PNG next to their page, each with its plotted
data as a CSV file beside it (``<name>.csv``), so a reader can redraw or check any figure."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt

from tracelab.analysis.statistics.gamma_fits import gamma_cdf
from tracelab.reports.model import Figure

FloatArray = npt.NDArray[np.float64]

# one size for every figure keeps pages calm; 100 dpi PNG stays small and renders offline
_FIGSIZE = (7.0, 4.0)
_DPI = 100
_MARGINS = {"left": 0.11, "right": 0.9, "bottom": 0.14, "top": 0.92, "wspace": 0.35, "hspace": 0.55}


@contextmanager
def new_axes(
    out: Path,
    name: str,
    alt: str,
    caption: str,
    *,
    ncols: int = 1,
    nrows: int = 1,
    margins: dict[str, float] | None = None,
    size: tuple[float, float] | None = None,
    data: PlottedData | None = None,
) -> Iterator[tuple[Any, list[Figure]]]:
    """Yield (axes, holder); on exit the figure is saved as ``out/name.png``, its plotted data as
    ``out/name.csv`` and its :class:`Figure` record appended to ``holder``.

    The CSV holds every line, bar and point drawn on the axes (:func:`plotted_data`), with the
    axis labels (units included) as column names; a figure whose marks are not data series (a
    graph, a heat map, violins) passes the table it was drawn from as ``data``.

    Margins are fixed (``margins`` overrides them) rather than computed by ``tight_layout``,
    which draws every figure an extra time and dominated the report's run time.
    """
    width = _FIGSIZE[0] if ncols == 1 else min(3.6 * ncols, 14.0)
    height = _FIGSIZE[1] if nrows == 1 else min(2.6 * nrows, 14.0)
    fig, axes = plt.subplots(nrows, ncols, figsize=size or (width, height), squeeze=False)
    fig.subplots_adjust(**{**_MARGINS, **(margins or {})})
    holder: list[Figure] = []
    try:
        yield (axes[0][0] if ncols == nrows == 1 else axes), holder
        out.mkdir(parents=True, exist_ok=True)
        file = f"{name}.png"
        # no timestamp metadata: the same results give the same bytes
        fig.savefig(out / file, format="png", dpi=_DPI, metadata={"Software": None})
        table = data if data is not None else plotted_data(fig)
        write_csv(out / f"{name}.csv", table)
        holder.append(Figure(file=file, alt=alt, caption=caption, data_file=f"{name}.csv"))
    finally:
        plt.close(fig)


def ecdf(values: FloatArray, max_points: int = 2000) -> tuple[FloatArray, FloatArray]:
    """(x, F(x)) of the empirical CDF, thinned to at most ``max_points`` points."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    if n == 0:
        return x, x
    y = np.arange(1, n + 1, dtype=np.float64) / n
    if n > max_points:
        idx = np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))
        x, y = x[idx], y[idx]
    return x, y


def gamma_fit_figure(
    out: Path,
    name: str,
    quantity: str,
    unit: str,
    gamma: tuple[float, float],
    sample: FloatArray,
    caption: str,
    after: str = "",
) -> list[Figure]:
    """The sample's empirical CDF with the fitted Gamma(shape, rate) CDF (location 0) over it;
    ``caption`` is completed with the axis used, then ``after`` (sentences). A sample spanning more than two decades
    (execution times: seconds to days) is drawn on a log axis, where it would pile up at 0 on a
    linear one."""
    shape, rate = gamma
    x, y = ecdf(sample)
    log = x.size > 0 and x[0] > 0 and x[-1] / x[0] > 100
    with new_axes(
        out,
        name,
        alt=f"Empirical CDF of {quantity} with the fitted Gamma CDF.",
        caption=f"{caption}{', log axis' if log else ''}. {after}".rstrip(),
    ) as (ax, figs):
        ax.step(x, y, where="post", label="data")
        grid = np.geomspace(x[0], x[-1], 400) if log else np.linspace(0.0, float(x[-1]), 400)
        ax.plot(grid, gamma_cdf(shape, rate, grid), label="Gamma fit")
        if log:
            ax.set_xscale("log")
        ax.set_xlabel(f"{quantity} ({unit})")
        ax.set_ylabel("fraction at or below")
        ax.legend()
    return figs


#: legend and axis names of columns whose words alone would not say what they are
_LABELS = {
    "cpu_change": "CPU used",
    "memory_change": "memory used",
    "queue_length_paper": "queue length (paper's definition)",
    "queue_length": "queue length",
    "running_tasks": "running tasks",
}


def human_label(column: str) -> str:
    """A column's name as a legend shows it: ``cdf_new_submissions`` -> ``new submissions``,
    ``used_cpu`` -> ``used CPU``."""
    if column in _LABELS:
        return _LABELS[column]
    name = column
    for prefix in ("cdf_", "weighted_", "cum_"):
        name = name.removeprefix(prefix)
    words = ["CPU" if w == "cpu" else w for w in name.split("_")]
    return " ".join(words)


#: a figure's data: column names (with units) and rows
PlottedData = tuple[tuple[str, ...], Sequence[Sequence[object]]]


def write_csv(path: Path, table: PlottedData) -> None:
    columns, rows = table
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows(rows)


def _label(text: str, fallback: str) -> str:
    return text.strip().replace("\n", " ") or fallback


def _series(ax: Any) -> Iterator[tuple[str, Any, Any]]:
    """(series label, x values, y values) of every data mark on ``ax``."""
    for i, line in enumerate(ax.get_lines()):
        # axvline/axhline marks are drawn in axes coordinates: a reference, not data
        if line.get_transform() != ax.transData:
            continue
        name = str(line.get_label())
        yield (
            (f"line {i + 1}" if name.startswith("_") else name),
            line.get_xdata(),
            line.get_ydata(),
        )
    for i, bars in enumerate(ax.containers):
        patches = [p for p in getattr(bars, "patches", ()) if hasattr(p, "get_height")]
        if not patches:
            continue
        name = str(bars.get_label())
        name = f"bars {i + 1}" if name.startswith("_") else name
        if getattr(bars, "orientation", "vertical") == "horizontal":
            yield (
                name,
                [p.get_width() for p in patches],
                [p.get_y() + p.get_height() / 2 for p in patches],
            )
        else:
            yield (
                name,
                [p.get_x() + p.get_width() / 2 for p in patches],
                [p.get_height() for p in patches],
            )
    for i, points in enumerate(ax.collections):
        if type(points).__name__ != "PathCollection":
            continue
        name = str(points.get_label())
        offsets = np.asarray(points.get_offsets())
        if offsets.size:
            yield (
                (f"points {i + 1}" if name.startswith("_") else name),
                offsets[:, 0],
                offsets[:, 1],
            )


def plotted_data(fig: Any) -> PlottedData:
    """Every line, bar container and scatter of ``fig``, one row per point: ``panel, series,
    <x label>, <y label>`` (the labels carry the units). Panels whose labels differ from the
    first panel's name their quantities per row."""
    axes = [ax for ax in fig.get_axes() if ax.get_visible() and ax.get_label() != "<colorbar>"]
    labels = [(_label(ax.get_xlabel(), "x"), _label(ax.get_ylabel(), "y")) for ax in axes]
    same = len(set(labels)) <= 1
    x_name, y_name = labels[0] if labels and same else ("x", "y")
    columns = ("panel", "series", x_name, y_name) + (() if same else ("x is", "y is"))
    rows: list[tuple[object, ...]] = []
    for n, (ax, (xl, yl)) in enumerate(zip(axes, labels, strict=True), start=1):
        panel = ax.get_title() or str(n)
        for name, xs, ys in _series(ax):
            for x, y in zip(np.asarray(xs).tolist(), np.asarray(ys).tolist(), strict=False):
                rows.append((panel, name, x, y) + (() if same else (xl, yl)))
    return columns, rows
