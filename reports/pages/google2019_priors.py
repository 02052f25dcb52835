"""The google-2019 Gamma priors page: ``tracelab priors --trace google-2019``'s
records (``DATA/results/google-2019/priors/params.json``) with their intervals and KS distances,
the window they cover, the samples it could not fit, the priors the trace cannot support, and the
options it ran with (its ``summary.json``). The table and each record's sentence are the
alibaba-2018 page's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracelab.analysis.common.datapaths import stage_results
from tracelab.analysis.common.fitted_params import FittedParameter
from tracelab.analysis.priors.google2019 import (
    CPU_UNIT,
    EXECUTION,
    FINISH,
    INST_MEAN,
    INST_STD,
    INSTANCE_TIMES,
    USAGE_STATS,
)
from tracelab.analysis.statistics.gamma_fits import finished_execution_times
from tracelab.analysis.statistics.variability import long_task_stats
from tracelab.analysis.traces import google2011, google2019
from tracelab.analysis.traces.model import terminal_codes
from tracelab.reports.figures import FloatArray
from tracelab.reports.frames import floats, scan
from tracelab.reports.model import (
    Fragment,
    Number,
    PageContext,
    PageSpec,
    Paragraph,
    Section,
)
from tracelab.reports.numfmt import fmt_int
from tracelab.reports.pages.alibaba_priors import PriorSamples, priors_sections, record_prose

#: v3's terminal event types, by their codes as the summary writes them
_ENDS = {str(code): name.upper() for code, name in terminal_codes(google2019.OUTCOME_CODES).items()}
_ENDS["none"] = "not ended"

_PAPER = (
    "No paper fits this trace with the model. The model's priors are Gamma (docs/methods.md §2.7, "
    f"as Janus & Rzadca fit them on {google2011.ID}): v3 has all three of {google2011.ID}'s samples (the "
    "execution times of finished instances; the inst mean and std of long instances, inst being "
    "one randomly sampled second per 5-minute window), so all three are fitted, with CPU in v3's "
    f"{CPU_UNIT} (normalized compute units), not {google2011.ID}'s normalised cores. Not supported: "
    "the Azure deployment model's priors (§2.6: core lifetime rate, scale-out rate and size, "
    "shutdown), which are defined on deployments of VMs with whole cores; v3 has neither (a "
    "collection is a job whose instances arrive with it, and requests are fractions of an NCU). "
    "A lake of machine_events alone (the real shard) supports none of the priors."
)


def google2019_priors_sections(ctx: PageContext) -> Sequence[Section]:
    """The fitted records first, then the options of the run."""
    return priors_sections(ctx, _PAPER, _prose, PriorSamples(_samples, _left_out))


def _samples(ctx: PageContext) -> Mapping[str, FloatArray]:
    """The three samples, as :func:`google2019_fits` selects them."""
    times = scan(ctx.derived(INSTANCE_TIMES), ("terminal_event_type", "execution_time_s"))
    usage = scan(ctx.derived(USAGE_STATS), ("is_long", "inst_mean", "inst_std"))
    long = long_task_stats(usage, ("inst_mean", "inst_std"))
    return {
        EXECUTION: finished_execution_times(times, FINISH),
        INST_MEAN: floats(long, "inst_mean"),
        INST_STD: floats(long, "inst_std"),
    }


def _left_out(name: str, summary: Mapping[str, Any]) -> str:
    """The incarnations the execution-time sample leaves out, from the ends the stage counted:
    the ones not ended are right-censored, the others ended otherwise than FINISH; the usage
    samples hold the long instances only."""
    inputs = summary.get("inputs", {})
    if name != EXECUTION:
        return (
            "Long instances only (is_long), without those that failed, were evicted, killed or "
            "lost."
        )
    ends = dict(inputs.get("terminal_event_types", {}))
    censored = ends.pop("none", 0)
    others = ", ".join(
        f"{fmt_int(n)} {_ENDS.get(k, k)}" for k, n in ends.items() if k != str(FINISH)
    )
    return (
        f"Left out of both curves: {fmt_int(censored)} incarnations not ended by the trace's end "
        "(right-censored: their execution time is longer than the trace shows)"
        + (f" and {others} ones." if others else ".")
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
            "Long instances (is_long in fct_task_usage_stats, set by derive's "
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


#: this module's pages (their stage orders them among the others)
PAGES = (
    PageSpec(
        f"{google2019.ID}-priors",
        f"Gamma priors of {google2019.ID}",
        google2019.ID,
        "priors",
        (stage_results("priors", "params.json").relative(google2019.ID),),
        f"tracelab priors --trace {google2019.ID}",
        google2019_priors_sections,
    ),
)
