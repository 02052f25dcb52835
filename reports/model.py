"""What a report page is made of: frozen records the templates render.

A page builder (``reports/pages_*.py``) is a plain function of one stage's output files that
returns a :class:`Page`; the site writer (``reports/site.py``) renders it. Numbers that a page
states about *this* run are :class:`Number` fragments, rendered with a ``data-key`` and the exact
value in ``data-value`` so a test can compare the page with the results file it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tracelab.analysis.common.datapaths import PARAMS_EXPORT, derived_table, stage_results
from tracelab.reports import numfmt


class InputsMissing(Exception):
    """A page's inputs are absent or lack a column; the page says so instead of failing the site."""


class NotEnoughData(Exception):
    """The inputs are there but hold too little to draw anything: the page says what it needed
    and found (``<what>: needs …; found …``) instead of empty axes or NaN."""


@dataclass(frozen=True)
class Number:
    """A computed number inside a paragraph: 3 significant digits (:func:`numfmt.fmt`), a share
    as a percentage with ``fmt="%"``, or ``fmt`` as a format spec (``",.0f"`` for counts)."""

    key: str
    value: float
    fmt: str = ""
    unit: str = ""

    @property
    def text(self) -> str:
        if self.fmt in ("", "%"):
            body = numfmt.fmt_pct(self.value) if self.fmt else numfmt.fmt(self.value)
        else:
            body = format(self.value, self.fmt)
        if self.unit == "%":
            return body + "%"
        return f"{body} {self.unit}".rstrip() if self.unit else body


#: a paragraph: plain text pieces and computed numbers, in reading order
Fragment = str | Number
Paragraph = tuple[Fragment, ...]


@dataclass(frozen=True)
class Figure:
    """An image written next to the page (``file`` is relative to the page's folder)."""

    file: str
    alt: str
    caption: str
    #: the plotted data as CSV, beside the image ("" for figures written before it existed)
    data_file: str = ""


@dataclass(frozen=True)
class HtmlTable:
    """A small table; cells are already formatted strings."""

    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    highlight_rows: tuple[int, ...] = ()


@dataclass(frozen=True)
class Section:
    """One figure group: what it shows in this run, what the paper reported."""

    title: str
    this_run: Paragraph
    paper: str
    figures: tuple[Figure, ...] = ()
    tables: tuple[HtmlTable, ...] = ()


@dataclass(frozen=True)
class Page:
    """One stage's page. ``unavailable`` holds the reason when its inputs are absent."""

    slug: str
    title: str
    trace: str
    stage: str
    sources: tuple[str, ...] = ()
    sections: tuple[Section, ...] = ()
    unavailable: str = ""
    numbers: dict[str, float] = field(default_factory=dict)
    #: parts of the stage left out for lack of data (``<part>: needs …; found …``)
    notes: tuple[str, ...] = ()
    #: which of the page's inputs come from the trace and which are generated, when the trace's
    #: one-line source would credit the trace with all of them (replaces that line)
    attribution: tuple[str, ...] = ()
    #: the page's first computed number with the words before it, for the index's link
    headline: str = ""
    #: the condition the headline number holds under, as its stage recorded it (summary.json)
    condition: str = ""

    @property
    def file(self) -> str:
        return f"{self.slug}.html"

    @property
    def figure_files(self) -> tuple[str, ...]:
        return tuple(f.file for s in self.sections for f in s.figures)


@dataclass(frozen=True)
class PageContext:
    """Where a page builder reads from and writes its figures to.

    Builders reach their inputs only through :meth:`derived` and :meth:`results`, which note each
    path they hand out in ``reads`` (relative to ``data_dir``). The site stores that list with the
    run, so a later run can tell from the checksums of exactly those files whether the pages would
    come out the same (``reports/fingerprint.py``).
    """

    data_dir: Path
    out_dir: Path
    trace: str
    reads: list[str] = field(default_factory=list)
    #: lines a builder adds when its page mixes the trace's data with generated data
    attribution: list[str] = field(default_factory=list)

    def derived(self, table: str) -> Path:
        return self._read(Path(derived_table(table).relative(self.trace)))

    def derived_for(self, trace: str, table: str) -> Path:
        """A derived table of another trace (pages that compare traces)."""
        return self._read(Path(derived_table(table).relative(trace)))

    def results(self, stage: str) -> Path:
        return self._read(Path(stage_results(stage).relative(self.trace)))

    def export(self) -> Path:
        return self._read(Path(PARAMS_EXPORT.relative()))

    def _read(self, relative: Path) -> Path:
        self.reads.append(relative.as_posix())
        return self.data_dir / relative


@dataclass(frozen=True)
class PageSpec:
    """A page of the site: which stage's outputs it needs and how to build it from them."""

    slug: str
    title: str
    trace: str
    #: the pipeline stage whose outputs it shows, with the result folder when the stage has
    #: several (``statistics/clustering``)
    stage: str
    #: paths relative to the data directory that must exist
    inputs: tuple[str, ...]
    #: the command that produces the inputs (shown when they are absent)
    command: str
    build: Callable[[PageContext], Sequence[Section]]

    @property
    def pipeline_stage(self) -> str:
        """The pipeline stage whose outputs the page shows (``statistics/clustering`` → ``statistics``)."""
        return self.stage.split("/", 1)[0]
