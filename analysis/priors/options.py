"""Stage ``priors``, declared: its options (one frozen dataclass; each field is a command-line
option) and its :class:`Stage` record.

The stage registry (``flows/registry.py``) builds the flags, their ``--help`` and range checks from
this record, and ``tracelab run`` passes the same object to the fit flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracelab.analysis.common.datapaths import derived_table, stage_results
from tracelab.analysis.common.stage_api import option
from tracelab.analysis.common.stage_declaration import Stage
from tracelab.analysis.lake.options import DeriveParams
from tracelab.analysis.traces import alibaba2018, azure2017, azure2019, google2019, traces_feeding

#: the derived tables' defaults: --shutdown-min-vms with --vmtable starts at derive's
_SQL = DeriveParams()


@dataclass(frozen=True)
class PriorsOptions:
    """``tracelab priors``: the Azure priors of Cluster Admission §5.1 and Appendix B; on
    alibaba-2018 and google-2019 the Gamma priors of :mod:`analysis.priors.alibaba` and
    :mod:`analysis.priors.google2019` (seed and n_boot only)."""

    seed: int = option(0, "bootstrap seed", minimum=0)
    n_boot: int = option(200, "bootstrap replicates", minimum=1, maximum=1_000_000)
    zero_event_probability: float | None = option(
        None,
        "Azure deployment model: fix p: a zero-event MLE becomes the value at which no event has this probability "
        "(default: p_rate and p_size calibrated by Cramér–von Mises, Cluster Admission paper App. B.1)",
        minimum=1e-6,
        maximum=1 - 1e-6,
    )
    alpha: float | None = option(
        None, "Azure deployment model: fix alpha instead of estimating it", minimum=0
    )
    shutdown_cores: str = option(
        "censored",
        "Azure deployment model: cores ended by a deployment shutdown: censored (they did not die of their own "
        "lifetime; the shutdown has its own model) or paper (deaths, as the Cluster Admission paper App. B counts them)",
        choices=("censored", "paper"),
    )
    vmtable: str = option(
        "",
        "Azure deployment model: derive the azure tables from this V1 vmtable CSV(.gz) and fit them instead",
    )
    shutdown_min_vms: int = option(
        _SQL.shutdown_min_vms,
        "with --vmtable: VMs ending together that mark a shutdown (else derive's option applies)",
        minimum=2,
    )

    @property
    def reads_own_input(self) -> bool:
        return bool(self.vmtable)


#: the options only the azure-2017 fit reads: the alibaba-2018 and google-2019 fits neither use
#: nor record them
AZURE_ONLY_OPTIONS = (
    "zero_event_probability",
    "alpha",
    "shutdown_cores",
    "vmtable",
    "shutdown_min_vms",
)


def options_for(trace: str, recorded: Mapping[str, Any]) -> dict[str, Any]:
    """``recorded`` (a summary's parameters) without the options the trace's fit does not read."""
    if trace in (azure2017.ID, azure2019.ID):
        return dict(recorded)
    return {k: v for k, v in recorded.items() if k not in AZURE_ONLY_OPTIONS}


STAGES = (
    Stage(
        name="priors",
        command="priors",
        aliases=("fit",),
        help="Gamma priors of the Azure deployment model, with censoring; on the other traces "
        "the Gamma priors each supports (execution time, CPU usage)",
        traces=traces_feeding("priors"),
        options=PriorsOptions,
        runs_as="priors",
        needs="tracelab.analysis.priors.needs:priors_needs",
        inputs=(derived_table("fct_azure_deployments"),),
        outputs=(stage_results("priors"),),
        upstream=("derive",),
        methods="§2.6, §2.7",
        trace_inputs=(
            (
                alibaba2018.ID,
                (
                    derived_table("fct_alibaba_task_times"),
                    derived_table("fct_alibaba_task_usage_stats"),
                ),
            ),
            (
                google2019.ID,
                (
                    derived_table("fct_task_times"),
                    derived_table("fct_task_usage_stats"),
                ),
            ),
        ),
    ),
)
