"""Reading stage outputs for pages: lazily, so a page's memory does not grow with the trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelab.reports import numfmt
from tracelab.reports.figures import FloatArray
from tracelab.reports.model import InputsMissing

#: at most this many points of a time series reach a figure
SERIES_POINTS = 2000


def scan(path: Path, columns: tuple[str, ...] = ()) -> pl.LazyFrame:
    """A lazy scan of a Parquet file or folder that has at least ``columns``."""
    source = str(path / "*.parquet") if path.is_dir() else str(path)
    lf = pl.scan_parquet(source)
    have = lf.collect_schema().names()
    missing = [c for c in columns if c not in have]
    if missing:
        raise InputsMissing(
            f"{path.name} lacks column(s) {', '.join(missing)} (has {', '.join(have)})"
        )
    return lf


def names(lf: pl.LazyFrame) -> list[str]:
    return lf.collect_schema().names()


def collect(lf: pl.LazyFrame) -> pl.DataFrame:
    """Collect with the streaming engine (bounded memory on large inputs)."""
    out = lf.collect(engine="streaming")
    assert isinstance(out, pl.DataFrame)
    return out


def series_on_grid(
    lf: pl.LazyFrame, time: str, values: list[str], points: int = SERIES_POINTS
) -> pl.DataFrame:
    """A step series thinned to about ``points`` time bins, keeping every bin's extremes.

    Per bin it keeps the rows where each value column is smallest and largest, and the bin's last
    row (running sums such as the queue length are step functions, so the last row is the value at
    the bin's end). A peak therefore survives thinning: the plotted maximum is the data's maximum.
    """
    bounds = collect(lf.select(pl.col(time).min().alias("lo"), pl.col(time).max().alias("hi")))
    lo, hi = bounds["lo"][0], bounds["hi"][0]
    if lo is None or hi is None:
        return pl.DataFrame({time: [], **{v: [] for v in values}})
    width = max((int(hi) - int(lo)) // points, 1)
    rows = lf.select(time, *values).with_row_index("_row")
    picks = [pl.col("_row").get(pl.col(time).arg_max()).alias("_last")]
    for j, v in enumerate(values):
        picks.append(pl.col("_row").get(pl.col(v).arg_max()).alias(f"_max{j}"))
        picks.append(pl.col("_row").get(pl.col(v).arg_min()).alias(f"_min{j}"))
    kept = (
        rows.with_columns(((pl.col(time) - lo) // width).alias("_bin"))
        .group_by("_bin")
        .agg(picks)
        .drop("_bin")
        .unpivot(value_name="_row")
        .select(pl.col("_row").drop_nulls().unique())
    )
    thinned = rows.join(kept, on="_row", how="semi").sort(time, "_row").drop("_row")
    return collect(thinned)


def floats(df: pl.DataFrame, column: str) -> FloatArray:
    return np.asarray(df[column].cast(pl.Float64).to_numpy(), dtype=np.float64)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file; a clear :class:`InputsMissing` when absent or not an object."""
    if not path.is_file():
        raise InputsMissing(f"missing {path.name}")
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise InputsMissing(f"{path.name} is not a JSON object")
    return doc


def fmt_int(value: float | int | None) -> str:
    return "–" if value is None else f"{int(value):,}"


def fmt_num(value: float | int | None, spec: str = "") -> str:
    """The site's one format (3 significant digits, :func:`numfmt.fmt`) unless ``spec`` is given
    (a column that needs more, such as a log-likelihood)."""
    if value is None:
        return "–"
    return format(float(value), spec) if spec else numfmt.fmt(value)
