"""What ``tracelab priors`` needs on each trace beyond its input files (its declaration's ``needs``)."""

from __future__ import annotations

from pathlib import Path

from tracelab.analysis.common.shortfall import Shortfall
from tracelab.analysis.priors import alibaba, google2019
from tracelab.analysis.priors.options import PriorsOptions
from tracelab.analysis.priors.vmtable import TRACE, vmtable_needs


def priors_needs(data_dir: Path, trace: str, params: PriorsOptions) -> Shortfall | None:
    """What keeps fit from running on ``trace``: google-2019 can lack every table its priors
    come from (a lake of machine_events alone), azure-2019 its vmtable (the published
    deployments table alone)."""
    if trace == google2019.TRACE:
        return google2019.google2019_needs(data_dir)
    if trace not in (alibaba.TRACE, TRACE):
        return vmtable_needs(data_dir, trace)
    return None
