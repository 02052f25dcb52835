"""Thinned series keep each bin's extremes: a plotted peak is the data's peak."""

from __future__ import annotations

import numpy as np
import polars as pl

from tracelab.reports.frames import series_on_grid


def test_a_single_spike_survives_thinning() -> None:
    n = 100_000
    t = np.arange(n, dtype=np.int64) * 1_000
    queue = np.full(n, 40, dtype=np.int64)
    queue[54_321] = 110  # one short peak inside a bin, not at its end
    queue[77_777] = -3  # and one trough
    other = np.sin(np.arange(n) / 500.0)
    lf = pl.LazyFrame({"time": t, "queue": queue, "other": other})
    out = series_on_grid(lf, "time", ["queue", "other"], points=100)
    assert out.height <= 100 * 5 + 5  # at most last + min/max per column per bin
    assert out.height < n / 50
    assert out["queue"].max() == 110
    assert out["queue"].min() == -3
    assert out["other"].max() == other.max()
    assert out["other"].min() == other.min()
    assert out["time"].is_sorted()
    # the last value of the series is kept (step functions end on it)
    assert out["time"][-1] == t[-1]


def test_every_bin_keeps_its_own_extremes() -> None:
    rng = np.random.default_rng(7)
    n = 20_000
    t = np.sort(rng.integers(0, 10**9, n))
    v = rng.normal(0.0, 1.0, n)
    out = series_on_grid(pl.LazyFrame({"time": t, "v": v}), "time", ["v"], points=50)
    width = max((int(t.max()) - int(t.min())) // 50, 1)
    bins = (t - t.min()) // width
    out_bins = (out["time"].to_numpy() - t.min()) // width
    for b in np.unique(bins):
        inside = v[bins == b]
        kept = out["v"].to_numpy()[out_bins == b]
        assert kept.max() == inside.max()
        assert kept.min() == inside.min()
