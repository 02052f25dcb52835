"""Stage ``calibration``, declared: its options and its :class:`Stage` record.

Light on purpose: ``tracelab calibration --help`` and ``tracelab run`` read this module without
loading the table's computation (``stage.py``: NumPy, Polars).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelab.analysis.common.datapaths import derived_table, stage_results
from tracelab.analysis.common.stage_api import option
from tracelab.analysis.common.stage_declaration import Stage
from tracelab.analysis.traces import traces_feeding


@dataclass(frozen=True)
class CalibrationOptions:
    """``tracelab calibration``: the calibration table of this run against published figures."""

    strict: bool = option(False, "exit 1 when a judged statistic is out of its tolerance")


STAGES = (
    Stage(
        name="calibration",
        command="calibration",
        aliases=("calibrate",),
        help="this run's statistics beside the published figures they should match, with tolerances",
        traces=traces_feeding("calibration"),
        options=CalibrationOptions,
        compute="tracelab.analysis.calibration.stage:calibration_results",
        page="calibration",
        inputs=(
            stage_results("clustering", "summary.json", producer="statistics"),
            derived_table("fct_task_times"),
        ),
        outputs=(stage_results("calibration"),),
        upstream=("derive", "statistics", "priors"),
        methods="§0.3, §2",
    ),
)
