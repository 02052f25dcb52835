"""The site's pages, in reading order: one :class:`PageSpec` per stage output."""

from __future__ import annotations

from tracelab.analysis.common.datapaths import PARAMS_EXPORT
from tracelab.analysis.traces import alibaba2018, azure2017, google2011, google2019
from tracelab.reports.model import PageSpec
from tracelab.reports.pages import admission as adm
from tracelab.reports.pages import alibaba_priors as alp
from tracelab.reports.pages import analysis as a
from tracelab.reports.pages import calibration as cal
from tracelab.reports.pages import compare as cmp
from tracelab.reports.pages import google as g
from tracelab.reports.pages import google2019_machines as g19m
from tracelab.reports.pages import google2019_priors as g19p
from tracelab.reports.pages import packing as pck
from tracelab.reports.pages import params as pp
from tracelab.reports.pages import placement as plc
from tracelab.reports.pages import priors as pr
from tracelab.reports.pages import vcsched as yld

_G, _A, _AL, _G19 = google2011.ID, azure2017.ID, alibaba2018.ID, google2019.ID
_DERIVE = f"tracelab derive --trace {_G}"
_ANALYZE = f"tracelab analyze --trace {_G}"
_FIT = f"tracelab fit --trace {_A}"


def _derived(table: str, trace: str = _G) -> str:
    return f"derived/{trace}/{table}.parquet"


GOOGLE_DERIVED_PAGES: tuple[PageSpec, ...] = (
    PageSpec(
        "google-transitions",
        "Task event transitions",
        _G,
        "derive",
        (_derived("agg_transition_counts"),),
        _DERIVE,
        g.transitions_sections,
    ),
    PageSpec(
        "google-event-cdf",
        "Submissions, schedules, completions over time",
        _G,
        "derive",
        (_derived("agg_event_cdf"),),
        _DERIVE,
        g.event_cdf_sections,
    ),
    PageSpec(
        "google-queue",
        "Queue length and running tasks",
        _G,
        "derive",
        (_derived("agg_queue_length"),),
        _DERIVE,
        g.queue_sections,
    ),
    PageSpec(
        "google-task-times",
        "Scheduling and execution times",
        _G,
        "derive",
        (_derived("fct_task_times"),),
        _DERIVE,
        g.task_times_sections,
    ),
    PageSpec(
        "google-usage",
        "Usage vs requests by priority",
        _G,
        "derive",
        (_derived("agg_usage_by_priority"),),
        _DERIVE,
        g.usage_sections,
    ),
    PageSpec(
        "google-utilization-change",
        "Utilization change between windows",
        _G,
        "derive",
        (_derived("agg_utilization_change"),),
        _DERIVE,
        g.utilization_change_sections,
    ),
    PageSpec(
        "compare-traces",
        "Traces side by side",
        "all",
        "derive",
        # which traces are present varies; the page says when none is
        (),
        "tracelab derive --trace T",
        cmp.compare_sections,
    ),
)


def _result(stage: str, file: str, trace: str = _G) -> str:
    return f"results/{trace}/{stage}/{file}"


GOOGLE_ANALYSIS_PAGES: tuple[PageSpec, ...] = (
    PageSpec(
        "google-inst-vs-avg",
        "Inst vs avg",
        _G,
        "analyze/inst_vs_avg",
        (_result("inst_vs_avg", "convergence.parquet"),),
        _ANALYZE,
        a.inst_vs_avg_sections,
    ),
    PageSpec(
        "google-variability",
        "Variability of CPU usage",
        _G,
        "analyze/variability",
        (_result("variability", "regression.parquet"),),
        _ANALYZE,
        a.variability_sections,
    ),
    PageSpec(
        "google-time-invariance",
        "Time invariance (KS)",
        _G,
        "analyze/time_invariance",
        (_result("time_invariance", "shares.parquet"),),
        _ANALYZE,
        a.time_invariance_sections,
    ),
    PageSpec(
        "google-clustering",
        "Histogram clustering",
        _G,
        "analyze/clustering",
        (_result("clustering", "shares.parquet"), _result("clustering", "centroids.parquet")),
        _ANALYZE,
        a.clustering_sections,
    ),
    PageSpec(
        "google-gaussian-sums",
        "Gaussian approximation of sums",
        _G,
        "analyze/gaussian_sums",
        (_result("gaussian_sums", "table.parquet"),),
        _ANALYZE,
        a.gaussian_sums_sections,
    ),
    PageSpec(
        "google-gamma-fits",
        "Gamma fits (usage, execution time)",
        _G,
        "analyze/gamma_fits",
        (_result("gamma_fits", "fits.parquet"),),
        _ANALYZE,
        a.gamma_fits_sections,
    ),
)

AZURE_PAGES: tuple[PageSpec, ...] = (
    PageSpec(
        "azure-priors",
        "Gamma priors of the deployment model",
        _A,
        "fit/priors",
        (
            _result("priors", "params.json", _A),
            _result("priors", "deployment_mles.parquet", _A),
        ),
        _FIT,
        pr.priors_sections,
    ),
)

ALIBABA_PAGES: tuple[PageSpec, ...] = (
    PageSpec(
        "alibaba-priors",
        f"Gamma priors of {_AL}",
        _AL,
        "fit/priors",
        (_result("priors", "params.json", _AL),),
        f"tracelab fit --trace {_AL}",
        alp.alibaba_priors_sections,
    ),
    PageSpec(
        f"{_G19}-priors",
        f"Gamma priors of {_G19}",
        _G19,
        "fit/priors",
        (_result("priors", "params.json", _G19),),
        f"tracelab fit --trace {_G19}",
        g19p.google2019_priors_sections,
    ),
)

CALIBRATION_PAGES: tuple[PageSpec, ...] = (
    PageSpec(
        "calibration",
        "Calibration: this run against the published figures",
        _G,
        "calibration",
        (_result("calibration", "table.parquet"),),
        "tracelab calibrate",
        cal.calibration_sections,
    ),
)

EXPORT_PAGES: tuple[PageSpec, ...] = (
    PageSpec(
        "params",
        "Exported parameters",
        "all",
        "export",
        (PARAMS_EXPORT.relative(),),
        "tracelab export",
        pp.params_sections,
    ),
)

CONSUMER_PAGES: tuple[PageSpec, ...] = (
    PageSpec(
        "google-packing",
        "Stochastic bin packing (GPA)",
        _G,
        "packing",
        (_result("packing", "summary.json"),),
        f"tracelab pack --trace {_G}",
        pck.packing_sections,
    ),
    PageSpec(
        "google-yield",
        "Yield maximisation (VCSched)",
        _G,
        "yield",
        (_result("yield", "summary.json"),),
        f"tracelab yield --trace {_G}",
        yld.yield_sections,
    ),
    PageSpec(
        "azure-admission",
        "Cluster admission control",
        _A,
        "admission",
        (_result("admission", "summary.json", _A),),
        "tracelab admit",
        adm.admission_sections,
    ),
    PageSpec(
        "azure-placement",
        "Lifetime-aware VM placement",
        _A,
        "placement",
        (_result("placement", "summary.json", _A),),
        "tracelab place",
        plc.placement_sections,
    ),
)

GOOGLE_2019_DERIVED_PAGES: tuple[PageSpec, ...] = (
    PageSpec(
        f"{_G19}-machines",
        f"Machines and capacity of {_G19}",
        _G19,
        "derive",
        (
            _derived("agg_machine_capacity", _G19),
            _derived("agg_machine_capacity_mix", _G19),
        ),
        f"tracelab derive --trace {_G19}",
        g19m.google2019_machines_sections,
    ),
)

PAGE_SPECS: dict[str, PageSpec] = {
    p.slug: p
    for p in GOOGLE_DERIVED_PAGES
    + GOOGLE_2019_DERIVED_PAGES
    + GOOGLE_ANALYSIS_PAGES
    + AZURE_PAGES
    + ALIBABA_PAGES
    + CALIBRATION_PAGES
    + EXPORT_PAGES
    + CONSUMER_PAGES
}
