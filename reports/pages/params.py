"""The params page: every record of the exported params document, as later stages read it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracelab.analysis.common.datapaths import PARAMS_EXPORT
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.fitted_params import FittedParameter
from tracelab.analysis.export.document import load_params
from tracelab.reports.model import HtmlTable, InputsMissing, Number, PageContext, PageSpec, Section
from tracelab.reports.numfmt import fmt


@dataclass(frozen=True)
class ParamsNumbers:
    """What the page states about the document."""

    schema_version: str
    code_version: str
    created_at: str
    records: tuple[FittedParameter, ...]


def params_numbers(ctx: PageContext) -> ParamsNumbers:
    """The document through :func:`load_params`, the same check every consuming stage makes."""
    path = ctx.export()
    if not path.is_file():
        raise InputsMissing("missing exports/params.json")
    try:
        doc = load_params(path)
    except TracelabError as exc:
        raise InputsMissing(str(exc)) from None
    return ParamsNumbers(doc.schema_version, doc.code_version, doc.created_at, tuple(doc.records))


def _cell(record: FittedParameter) -> str:
    return ", ".join(
        f"{k} = {fmt(q.value)}{(' ' + q.unit) if q.unit else ''}"
        for k, q in record.parameters.items()
    )


def params_sections(ctx: PageContext) -> Sequence[Section]:
    """One table: record, trace, stage, distribution, parameters, n, method."""
    numbers = params_numbers(ctx)
    rows = tuple(
        (r.name, r.trace, r.stage, r.distribution, _cell(r), f"{r.n:,}", r.method)
        for r in numbers.records
    )
    table = HtmlTable(
        caption="Every record of DATA/exports/params.json (`tracelab export`; "
        "`--format csv` gives one row per fitted parameter, and the arrays in params_values.csv)",
        columns=("record", "trace", "stage", "distribution", "parameters", "n", "method"),
        rows=rows,
    )
    return (
        Section(
            title="Exported parameters",
            this_run=(
                f"Schema {numbers.schema_version}, code {numbers.code_version}, "
                f"exported {numbers.created_at}: ",
                Number("params_records", float(len(rows)), ",.0f"),
                " records. The consuming stages (packing, admission, placement, yield) read "
                "only this document, through load_params, which refuses another major version "
                "or an edited document.",
            ),
            paper="docs/methods.md §4: one versioned document with every fitted parameter, its method, "
            "sample size, goodness of fit, source files and the code version.",
            tables=(table,),
        ),
    )


#: this module's pages (their stage orders them among the others)
PAGES = (
    PageSpec(
        "params",
        "Exported parameters",
        "all",
        "export",
        (PARAMS_EXPORT.relative(),),
        "tracelab export",
        params_sections,
    ),
)
