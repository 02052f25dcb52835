"""The google-2019 Gamma priors page (issue 27, step 4): ``tracelab fit --trace google-2019``'s
records (``DATA/results/google-2019/priors/params.json``) with their intervals and KS distances,
the window they cover, the samples it could not fit, the priors the trace cannot support, and the
options it ran with (its ``summary.json``). The table and each record's sentence are the
alibaba-2018 page's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracelab.analysis.common.shortfall import read_shortfalls
from tracelab.analysis.common.stage_outputs import read_json_object
from tracelab.analysis.export.params import FittedParameter, read_stage_params
from tracelab.analysis.priors.google2019 import CPU_UNIT, STAGE
from tracelab.reports.metadata import data_sources
from tracelab.reports.model import (
    Fragment,
    InputsMissing,
    Number,
    PageContext,
    Paragraph,
    Section,
)
from tracelab.reports.numfmt import fmt_int
from tracelab.reports.pages.alibaba_priors import priors_table, record_prose
from tracelab.reports.run_parameters import parameters_section

#: v3's terminal event types (clusterdata_trace_format_v3.proto)
_ENDS = {"4": "EVICT", "5": "FAIL", "6": "FINISH", "7": "KILL", "8": "LOST", "none": "not ended"}

_PAPER = (
    "No paper fits this trace with the model. The model's priors are Gamma (docs/methods.md §2.7, "
    "as Janus & Rzadca fit them on google-2011): v3 has all three of google-2011's samples (the "
    "execution times of finished instances; the inst mean and std of long instances, inst being "
    "one randomly sampled second per 5-minute window), so all three are fitted, with CPU in v3's "
    f"{CPU_UNIT} (normalized compute units), not google-2011's normalised cores. Not supported: "
    "the Azure deployment model's priors (§2.6: core lifetime rate, scale-out rate and size, "
    "shutdown), which are defined on deployments of VMs with whole cores; v3 has neither (a "
    "collection is a job whose instances arrive with it, and requests are fractions of an NCU). "
    "A lake of machine_events alone (the real shard) supports none of the priors."
)


def google2019_priors_sections(ctx: PageContext) -> Sequence[Section]:
    """The fitted records first, then the options of the run."""
    folder = ctx.results(STAGE)
    if not (folder / "params.json").is_file():
        raise InputsMissing("priors/params.json is missing")
    records = read_stage_params(folder)
    summary = read_json_object(folder / "summary.json")
    source = data_sources(ctx.data_dir, (ctx.trace,)).get(ctx.trace, "source not recorded")
    return (
        Section(
            title="Gamma priors of google-2019",
            this_run=_prose(records, read_shortfalls(folder), source, summary),
            paper=_PAPER,
            tables=(priors_table(records, ctx.trace),),
        ),
        parameters_section(summary, "fit", "fit"),
    )


def _prose(
    records: Sequence[FittedParameter],
    shortfalls: Sequence[str],
    source: str,
    summary: Mapping[str, Any],
) -> Paragraph:
    inputs = summary.get("inputs", {})
    out: list[Fragment] = [f"Data: {source}. ", *_window(inputs.get("window_hours"))]
    out.append(
        "Each prior is a Gamma fitted by maximum likelihood with location 0; intervals are 95% "
        "percentile-bootstrap intervals (replicates and seed below). "
    )
    for r in records:
        out += record_prose(r)
    if not records:
        out.append("No sample could be fitted. ")
    for text in shortfalls:
        out.append(f"Not fitted: {text}. ")
    ends = inputs.get("terminal_event_types", {})
    if ends:
        listed = ", ".join(f"{_ENDS.get(k, k)} {fmt_int(n)}" for k, n in ends.items())
        out.append(
            f"Ends of the incarnations: {listed}; only FINISHed ones enter the execution-time fit. "
        )
    long = inputs.get("long_instances")
    if long is not None:
        out += [
            "Long instances (is_long in fct_g2019_instance_usage_stats, set by derive's "
            "long_task_windows; failed, evicted, killed and lost instances left out): ",
            Number("long_instances", float(long), ",.0f"),
            ".",
        ]
    return tuple(out)


def _window(hours: Sequence[float] | None) -> list[Fragment]:
    if not hours:
        return ["Window: no FINISHed incarnation with an execution time. "]
    return [
        "Window: the FINISHed incarnations run from hour ",
        Number("window_start_h", float(hours[0])),
        " to hour ",
        Number("window_end_h", float(hours[1])),
        " of the trace. ",
    ]
