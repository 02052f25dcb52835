"""Stage ``yield``, declared: its options (the instance grid, the algorithms) and its
:class:`Stage` record.

Light on purpose: ``tracelab yield --help`` and ``tracelab run`` read this module without loading
the solvers (``stage.py``, ``algorithms.py``: NumPy, SciPy's HiGHS).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelab.analysis.common.datapaths import LAKE_MANIFEST, stage_results
from tracelab.analysis.common.stage_api import option
from tracelab.analysis.common.stage_declaration import Stage
from tracelab.analysis.traces import traces_feeding

#: the paper's bound on placement attempts for GB and SGB (§3.3)
PAPER_BACKTRACK_LIMIT = 500_000
#: RRNZ replaces zero LP values by this probability weight (§3.2: "we used ε = 0.01")
PAPER_RRNZ_EPSILON = 0.01
MCB_VARIANTS = (1, 2, 3, 4, 5, 6, 7, 8)

MCB_NAMES = tuple(f"MCB{v}" for v in MCB_VARIANTS)
GREEDY_NAMES = ("GR", "SG", "GB", "SGB")
ROUNDING_NAMES = ("RRND", "RRNZ")
ALGORITHMS = (*MCB_NAMES, *GREEDY_NAMES, *ROUNDING_NAMES, "MILP", "LP")
PAPER_SLACKS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class YieldParams:
    """The instance grid and the algorithms; defaults are a small grid (about 20 s on 2 cores)."""

    sources: tuple[str, ...] = option(
        ("paper", "trace"),
        "instance sources: the §4.1 generator, tasks of the trace",
        choices=("paper", "trace"),
    )
    algorithms: tuple[str, ...] = option(ALGORITHMS, "algorithms to run", choices=ALGORITHMS)
    small_hosts: int = option(4, "hosts of the small problems (§4.1: 4)", minimum=1, maximum=64)
    small_jobs: tuple[int, ...] = option(
        (6, 8, 10),
        "jobs of the small problems (§4.1: 6, 8, 10, 12); empty: no small problems",
        minimum=1,
        maximum=64,
        allow_empty=True,
    )
    small_instances: int = option(
        1, "instances per small problem spec (paper: 10)", minimum=0, maximum=1000
    )
    large_hosts: int = option(64, "hosts of the large problems (§4.1: 64)", minimum=1, maximum=4096)
    large_jobs: tuple[int, ...] = option(
        (100, 500),
        "jobs of the large problems (§4.1: 100, 250, 500); empty: no large problems",
        minimum=1,
        maximum=100_000,
        allow_empty=True,
    )
    large_instances: int = option(
        1, "instances per large problem spec (paper: 100)", minimum=0, maximum=10_000
    )
    slacks: tuple[float, ...] = option(
        (0.1, 0.2, 0.5, 0.8), "memory slacks (paper: 0.1 … 0.9)", minimum=0.0, maximum=0.99
    )
    cvs: tuple[float, ...] = option(
        (0.25, 0.75), "coefficients of variation of CPU and memory", minimum=0.0, maximum=10.0
    )
    trace_jobs: tuple[int, ...] = option(
        (100, 500), "tasks per trace instance", minimum=1, maximum=100_000
    )
    trace_instances: int = option(
        2, "trace instances per (tasks, slack)", minimum=0, maximum=10_000
    )
    trace_cpu_load: float = option(
        2.0,
        "trace instances: CPU needs scaled so that they sum to this many hosts (0: as requested)",
        minimum=0.0,
        maximum=100.0,
    )
    milp_max_jobs: int = option(
        10, "MILP only on instances with at most this many jobs", minimum=0, maximum=1000
    )
    milp_time_limit_s: float = option(
        60.0, "HiGHS time limit per MILP (s)", minimum=0.1, maximum=86_400.0
    )
    rounding_max_jobs: int = option(
        12, "RRND/RRNZ (an LP each) only up to this many jobs", minimum=0, maximum=100_000
    )
    backtrack_limit: int = option(
        10_000, "GB/SGB placement attempts (§3.3)", minimum=1, maximum=100_000_000
    )
    yield_tolerance: float = option(
        1e-4, "MCB binary search stops below this width", minimum=1e-9, maximum=0.5
    )
    rrnz_epsilon: float = option(
        PAPER_RRNZ_EPSILON, "RRNZ weight for zero LP values (§3.2)", minimum=0.0, maximum=1.0
    )
    seed: int = option(0, "seed of the instance grid and of the rounding", minimum=0)

    def options_problem(self) -> str | None:
        """A sentence when the grid has no instance at all (its summary would be all NaN)."""
        per_slack = 0
        if "paper" in self.sources:
            jobs = len(self.small_jobs) * self.small_instances
            per_slack += (jobs + len(self.large_jobs) * self.large_instances) * len(self.cvs) ** 2
        if "trace" in self.sources:
            per_slack += len(self.trace_jobs) * self.trace_instances
        if per_slack:
            return None
        return (
            "these options make no instance: give --small-jobs or --large-jobs (with their "
            "--*-instances above 0) for the paper's source, or --trace-instances above 0"
        )


#: Virtual Clusters §4.1's full grid: 1,440 small and 10,800 large instances, all algorithms
PAPER_YIELD_PARAMS = YieldParams(
    sources=("paper",),
    small_instances=10,
    large_instances=100,
    slacks=PAPER_SLACKS,
    small_jobs=(6, 8, 10, 12),
    large_jobs=(100, 250, 500),
    rounding_max_jobs=100_000,
    milp_max_jobs=12,
    backtrack_limit=PAPER_BACKTRACK_LIMIT,
    trace_instances=0,
)


STAGES = (
    Stage(
        name="yield",
        command="yield",
        scales_out=True,
        help="yield maximisation (VCSched: MCB1–8, greedy, LP/MILP) on paper and trace instances",
        traces=traces_feeding("yield"),
        options=YieldParams,
        compute="tracelab.analysis.yield_.stage:yield_results",
        # the paper's instances need no data; the trace's need task_events and machine_events
        # (without them the stage runs the paper's only and says so)
        needs="tracelab.analysis.yield_.needs:yield_needs",
        page="google-yield",
        inputs=(LAKE_MANIFEST,),
        outputs=(stage_results("yield"),),
        upstream=("ingest",),
        methods="§3.4",
    ),
)
