"""Stage ``packing``, declared: its options (the experiment grid) and its :class:`Stage` record.

Light on purpose: ``tracelab packing --help`` and ``tracelab run`` read this module without loading
the packing computation (``stage.py``, NumPy, Polars).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelab.analysis.common.datapaths import PARAMS_EXPORT, derived_table, stage_results
from tracelab.analysis.common.stage_api import option
from tracelab.analysis.common.stage_declaration import Stage
from tracelab.analysis.traces import traces_feeding

#: Janus & Rzadca §4: rebalancing stops after this many consecutive failed migrations
PAPER_MAX_FAILURES = 5


@dataclass(frozen=True)
class PackingParams:
    """The experiment grid; the defaults are the small grid ``tracelab run`` uses."""

    source: str = option(
        "trace",
        "where tasks come from: the trace's long tasks, or the params export alone",
        choices=("trace", "params"),
    )
    seed: int = option(0, "seed of the task draws and realizations", minimum=0)
    instances: int = option(4, "instances (paper: 50)", minimum=1, maximum=10_000)
    tasks: int = option(1000, "tasks per instance (paper: 1,000)", minimum=2, maximum=100_000)
    realizations: int = option(
        1000, "realizations R per task (paper: 10,000)", minimum=10, maximum=100_000
    )
    capacity: float = option(1.0, "machine capacity c of the base case (cores)", minimum=0.01)
    rhos: tuple[float, ...] = option(
        (0.1, 0.05, 0.01, 0.001), "GPA target overflow probabilities ρ", minimum=1e-9, maximum=0.49
    )
    cantelli: tuple[float, ...] = option((1.0, 1.7, 4.4), "Cantelli multipliers b", minimum=0.0)
    av_factors: tuple[float, ...] = option((1.0, 1.25, 2.0), "av factors f", minimum=0.0)
    percentiles: tuple[float, ...] = option(
        (50.0, 70.0, 90.0, 95.0, 99.0, 100.0), "perc percentiles", minimum=0.0, maximum=100.0
    )
    capacities: tuple[float, ...] = option(
        (0.5, 0.8, 1.0, 2.0, 5.0), "capacities c of the capacity experiment (Fig. 11)", minimum=0.01
    )
    clairvoyance: tuple[float, ...] = option(
        (0.01, 0.1, 1.0),
        "clairvoyance levels v of Fig. 12 (paper: 0.001,0.01,0.1,0.3,0.5,0.8,1)",
        minimum=1e-6,
        maximum=1.0,
    )
    max_failures: int = option(
        PAPER_MAX_FAILURES,
        "rebalancing stops after this many failures in a row",
        minimum=1,
        maximum=1_000_000_000,
    )
    statistics_experiment: bool = option(
        True, "run the inst-vs-avg statistics experiment (Fig. 10)"
    )
    capacity_experiment: bool = option(True, "run the capacity experiment (Fig. 11)")
    clairvoyance_experiment: bool = option(True, "run the clairvoyance experiment (Fig. 12)")

    def memory_estimate(self) -> tuple[int, str]:
        """Peak bytes of one instance: its tasks x R draws, window indices, inst and avg values
        and the sorted copies the percentiles take (about six float64 matrices)."""
        return self.tasks * self.realizations * 8 * 6, "--tasks or --realizations"


#: Janus & Rzadca §5: the full grid (50 instances × 1,000 tasks, R = 10,000, every figure)
PAPER_PACKING_PARAMS = PackingParams(
    instances=50,
    tasks=1000,
    realizations=10_000,
    clairvoyance=(0.001, 0.01, 0.1, 0.3, 0.5, 0.8, 1.0),
)


STAGES = (
    Stage(
        name="packing",
        command="packing",
        aliases=("pack",),
        scales_out=True,
        help="stochastic bin packing with GPA and its baselines (Janus & Rzadca 2017 §4–5)",
        traces=traces_feeding("packing"),
        options=PackingParams,
        compute="tracelab.analysis.packing.stage:packing_results",
        # the long tasks it draws are checked here, beyond its input files
        needs="tracelab.analysis.packing.needs:packing_needs",
        page="google-packing",
        inputs=(derived_table("fct_task_usage_stats"), PARAMS_EXPORT),
        outputs=(stage_results("packing"),),
        upstream=("ingest", "derive", "export"),
        methods="§3.1",
    ),
)
