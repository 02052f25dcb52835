"""The headline a derived page's summary mart stores beside its numbers.

A page drawn from derived tables has no stage summary.json; its numbers come from a one-row
``agg_<page>_summary`` mart, which also names the number the index leads with
(:data:`HEADLINE_KEY`) and the condition it holds under (:data:`CONDITION`), computed by the same
query as the number, so the index never shows a derived page's number without what it is of.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

#: the summary mart's column naming the number the index shows beside the page's link
HEADLINE_KEY = "headline_key"
#: the summary mart's column saying what that number holds under
CONDITION = "condition"
#: the file-name ending of a page's summary mart (``agg_task_times_summary.parquet``)
SUMMARY_SUFFIX = "_summary.parquet"


def read_table_headline(path: Path) -> tuple[str, str] | None:
    """The (key, condition) of a summary mart's first row; None when the file is absent, lacks
    the columns or has no row."""
    if not path.is_file():
        return None
    table = pq.read_table(path)
    if table.num_rows == 0 or not {HEADLINE_KEY, CONDITION} <= set(table.column_names):
        return None
    key = table.column(HEADLINE_KEY)[0].as_py()
    condition = table.column(CONDITION)[0].as_py()
    if not isinstance(key, str) or not isinstance(condition, str):
        return None
    return key, condition
