"""Float sums and means that give the same bits in every run.

A sum of doubles depends on the order of its additions. Polars' ``group_by`` adds each group's
rows in per-thread partial sums merged in whatever order the threads finish, so
``pl.col(x).sum()`` in an ``agg`` can differ in its last bits between two identical runs (and a
row order set by a join or a parallel read moves it too). These expressions sort each group's
values and add them in that order, one list at a time: the result depends only on the values.
Nulls are skipped, as by ``sum`` and ``mean``.
"""

from __future__ import annotations

import polars as pl


def sorted_sum(column: str) -> pl.Expr:
    """``pl.col(column).sum()``, adding the values in ascending order (0 for no values)."""
    return pl.col(column).sort().implode().list.sum()


def sorted_mean(column: str) -> pl.Expr:
    """``pl.col(column).mean()``, adding the values in ascending order (null for no values)."""
    return pl.col(column).sort().implode().list.mean()
