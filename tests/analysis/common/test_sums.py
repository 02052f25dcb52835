"""Group sums and means whose bits do not depend on the row order or on Polars' threads."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from tracelab.analysis.common.sums import sorted_mean, sorted_sum

# values over twelve orders of magnitude: their float sum depends on the order of the additions
N = 400_000


def _frame(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N) * 10.0 ** rng.integers(0, 12, N)
    frame = pl.DataFrame({"g": rng.integers(0, 3, N), "x": x})
    return frame.sample(fraction=1.0, shuffle=True, seed=seed)


def _bits(frame: pl.DataFrame) -> list[tuple[int, ...]]:
    return [tuple(frame[c].to_numpy().view(np.int64)) for c in frame.columns if c != "g"]


def test_a_plain_group_sum_depends_on_the_row_order() -> None:
    # the premise: what the helpers fix
    sums = {str(_bits(_frame(s).group_by("g").agg(pl.col("x").sum()).sort("g"))) for s in range(4)}
    assert len(sums) > 1


def test_sorted_sum_and_mean_give_the_same_bits_for_any_row_order() -> None:
    results = [
        _frame(seed)
        .group_by("g")
        .agg(sorted_sum("x").alias("s"), sorted_mean("x").alias("m"))
        .sort("g")
        for seed in range(4)
    ]
    assert all(_bits(r) == _bits(results[0]) for r in results)
    # the values: the exactly rounded sum (math.fsum) up to the rounding of ~1e5 additions
    frame = _frame(0)
    for g, s, m in results[0].iter_rows():
        values = frame.filter(pl.col("g") == g)["x"].to_list()
        scale = sum(abs(v) for v in values)
        assert abs(s - math.fsum(values)) <= 1e-10 * scale
        assert abs(m - math.fsum(values) / len(values)) <= 1e-10 * scale / len(values)


def test_nulls_are_skipped_as_by_sum_and_mean() -> None:
    frame = pl.DataFrame(
        {"g": [1, 1, 2, 2], "x": [None, None, 0.5, None]},
        schema={"g": pl.Int64, "x": pl.Float64},
    )
    got = frame.group_by("g").agg(sorted_sum("x").alias("s"), sorted_mean("x").alias("m"))
    assert got.sort("g").rows() == [(1, 0.0, None), (2, 0.5, 0.5)]
