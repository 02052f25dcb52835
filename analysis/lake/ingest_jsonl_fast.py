"""The vectorised path of google-2019's JSON-lines ingest: the export's own line shape, typed by Polars.

The definition of a valid line stays :func:`analysis.lake.ingest_jsonl.parse_line` (the reference,
Python's ``json`` line by line). This path only takes the lines it can prove that function
accepts, and types them to the same values; every other line goes to the reference, which types
it or gives its reason. A line is taken when it has the **canonical shape** the BigQuery export
writes, checked by one regular expression per table (Polars' ``str.contains``, a DFA):

* one object, no whitespace, the table's keys in v3 field order, each at most once (so no
  duplicate and no unknown key), the first (mandatory) key first; NULL fields left out;
* integers as JSON strings of digits (``"time":"1687655299440"``), floats as JSON numbers
  (``"cpus":0.5``, never ``-0`` written as an integer: Python reads it as the integer 0, a float
  parser as -0.0), booleans ``true``/``false``, text as JSON strings without an escape or a
  control character (so the text is the value, byte for byte), repeated numbers as arrays of
  those, a nested message as an object of its leaves in field order;
* ``constraint`` as an array of objects with text values under ``name``, ``value``,
  ``relation`` (in that order, each at most once): then the reference's compact JSON text of the
  parsed array is the array's own text, which is what is stored.

Lines of that shape are read by ``pl.read_ndjson`` with the schema typed from the v3 schema
(integers read as text and cast, since the export quotes them); a line the reader refuses (a
float beyond float64: ``1e400``) is found by halving the batch and goes to the reference.
After the cast, a row whose integer does not fit int64, whose float is not finite or whose
mandatory field is missing goes to the reference too. Polars' and Python's float parsers both
round correctly, so a number reads as the same float on both paths
(``tests/analysis/lake/test_ingest_jsonl_differential.py`` checks all of this against the
reference on generated lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from tracelab.analysis.lake.schemas import Column, Table

#: a JSON string that decodes to itself: no quote, backslash or control character
_TEXT = r'"[^"\\\x00-\x1f]*"'
#: the export's INT64: a JSON string of digits (what Python's ``int`` takes, cast by Polars)
_INT = r'"[+-]?[0-9]+"'
#: a JSON number, except the integer ``-0`` (read as 0 by Python, as -0.0 by a float parser)
_NUMBER = r"(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)|0|-?[1-9][0-9]*)"
_BOOL = r"(?:true|false)"
_CONSTRAINT_KEYS = ("name", "value", "relation")
_READ_TYPE: dict[str, pl.DataType] = {
    "int": pl.String(),
    "float": pl.Float64(),
    "str": pl.String(),
    "bool": pl.Boolean(),
    "int_list": pl.List(pl.String()),
    "float_list": pl.List(pl.Float64()),
}


def _array(item: str) -> str:
    return rf"\[(?:{item}(?:,{item})*)?\]"


def _ordered_subset(members: list[tuple[str, str]]) -> str:
    """An object holding any of ``members`` (key, value pattern), in their order, each at most
    once: one alternative per first member present, so commas only ever separate two members."""
    alternatives = []
    for i, (key, value) in enumerate(members):
        rest = "".join(f'(?:,"{k}":{v})?' for k, v in members[i + 1 :])
        alternatives.append(f'"{key}":{value}{rest}')
    return r"\{(?:" + "|".join(alternatives) + r")?\}"


_CONSTRAINT = _array(_ordered_subset([(k, _TEXT) for k in _CONSTRAINT_KEYS]))
_VALUE = {
    "int": _INT,
    "float": _NUMBER,
    "str": _TEXT,
    "bool": _BOOL,
    "int_list": _array(_INT),
    "float_list": _array(_NUMBER),
}


@dataclass(frozen=True)
class FastShape:
    """A table's canonical line pattern, its read schema, and its JSON-text columns."""

    table: Table
    pattern: str
    read_schema: dict[str, pl.DataType]
    #: JSON key -> the pattern capturing its array's text (``constraint``)
    json_text: dict[str, str]

    @classmethod
    def of(cls, table: Table, json_text_fields: frozenset[str]) -> FastShape:
        groups: dict[str, list[tuple[str, Column]]] = {}
        for column in table.columns:
            key, _, leaf = column.official.partition(".")
            groups.setdefault(key, []).append((leaf, column))
        members: list[str] = []
        schema: dict[str, pl.DataType] = {}
        json_text: dict[str, str] = {}
        for key, leaves in groups.items():
            if leaves[0][0]:  # a nested message: an object of its leaves
                value = _ordered_subset([(leaf, _VALUE[c.kind]) for leaf, c in leaves])
                schema[key] = pl.Struct({leaf: _READ_TYPE[c.kind] for leaf, c in leaves})
            elif leaves[0][1].name in json_text_fields:
                value = _CONSTRAINT
                json_text[key] = f'"{key}":({_CONSTRAINT})'
            else:
                value = _VALUE[leaves[0][1].kind]
                schema[key] = _READ_TYPE[leaves[0][1].kind]
            members.append(f'"{key}":{value}')
        # the first key is mandatory in every table: required here, so no leading comma
        pattern = r"^\{" + members[0] + "".join(f"(?:,{m})?" for m in members[1:]) + r"\}$"
        re.compile(pattern)  # fails at import time, not per chunk, if a pattern is malformed
        return cls(table, pattern, schema, json_text)


def canonical(shape: FastShape, text: pl.Series) -> pl.Series:
    """True for each line of the canonical shape (NULL text: a line that is not UTF-8)."""
    return text.str.contains(shape.pattern).fill_null(False)


def _read(
    shape: FastShape, text: pl.Series, data: bytes | None = None
) -> tuple[pl.DataFrame, np.ndarray]:
    """The lines read with the typed schema, and which lines were read (the rest: the reader
    refused them). A refused batch is halved until each refused line is alone. ``data``: the
    lines as bytes already (saves joining them)."""
    if data is None:
        data = (text.str.join("\n").item() + "\n").encode() if len(text) else b""
    try:
        frame = pl.read_ndjson(data, schema=shape.read_schema) if data else None
    except pl.exceptions.PolarsError:
        frame = None
    if frame is not None and frame.height == len(text):
        return frame, np.ones(len(text), dtype=bool)
    if len(text) <= 1:
        return pl.DataFrame(schema=shape.read_schema), np.zeros(len(text), dtype=bool)
    half = len(text) // 2
    head, head_ok = _read(shape, text[:half])
    tail, tail_ok = _read(shape, text[half:])
    return pl.concat([head, tail]), np.concatenate([head_ok, tail_ok])


def _typed(column: Column, read: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(the lake value, True where the reference must decide) of one column."""
    if column.kind == "int":
        typed = read.cast(pl.Int64, strict=False)
        doubt = read.is_not_null() & typed.is_null()
    elif column.kind == "int_list":
        typed = read.list.eval(pl.element().cast(pl.Int64, strict=False))
        doubt = typed.list.eval(pl.element().is_null()).list.any().fill_null(False)
    elif column.kind == "float":
        typed, doubt = read, ~read.is_finite().fill_null(True)
    elif column.kind == "float_list":
        # the sum of finite values is finite unless it overflows: then the reference decides
        typed, doubt = read, ~read.list.sum().is_finite().fill_null(True)
    else:
        typed, doubt = read, pl.lit(False)
    if column.mandatory:
        doubt = doubt | typed.is_null()
    return typed.alias(column.name), doubt


def chunk_text(chunk: bytes) -> pl.Series | None:
    """The lines of a chunk as text, without a Python object per line; None when the chunk
    has a CR or bytes that are not UTF-8 (then its lines are split the validated path's way)."""
    if b"\r" in chunk:
        return None
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # str.split and one Series of the list: half the CPU of Polars' own split of the text
    lines = text.split("\n")
    if chunk.endswith(b"\n"):
        lines.pop()
    return pl.Series("text", lines, dtype=pl.String)


def _typed_frame(shape: FastShape, frame: pl.DataFrame) -> pl.DataFrame:
    """The lake columns of read lines, and ``_doubt``: True where the reference must decide."""
    exprs: list[pl.Expr] = []
    doubts: list[pl.Expr] = []
    for column in shape.table.columns:
        key, _, leaf = column.official.partition(".")
        typed, doubt = _typed(column, pl.col(key).struct.field(leaf) if leaf else pl.col(key))
        exprs.append(typed)
        doubts.append(doubt)
    return frame.select(*exprs, pl.any_horizontal(doubts).alias("_doubt"))


def fast_rows(
    shape: FastShape, text: pl.Series, chunk: bytes | None = None
) -> tuple[pl.DataFrame, np.ndarray]:
    """The typed lake columns of the lines this path takes, and a mask of those lines.

    ``text`` is one line per element (NULL for a line that is not UTF-8); the rest of the
    lines (mask False) go to the reference parser. ``chunk``: the bytes ``text`` was split
    from by :func:`chunk_text`, read as they are when every line is taken.
    """
    taken = canonical(shape, text).to_numpy()
    lines = text.filter(pl.Series(taken))
    frame, read_ok = _read(shape, lines, chunk if taken.all() else None)
    if shape.json_text:
        read_lines = lines.filter(pl.Series(read_ok))
        frame = frame.with_columns(
            read_lines.str.extract(pattern, 1).alias(key)
            for key, pattern in shape.json_text.items()
        )
    typed_frame = _typed_frame(shape, frame)
    # the lines read and without doubt are this path's; the mask is over every line
    read_lines_at = np.flatnonzero(taken)[read_ok]
    taken[:] = False
    taken[read_lines_at[~typed_frame["_doubt"].to_numpy()]] = True
    return typed_frame.filter(~pl.col("_doubt")).drop("_doubt"), taken
