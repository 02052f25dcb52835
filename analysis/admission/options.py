"""Stage ``admission``, declared: its options and its :class:`Stage` record.

Light on purpose: ``tracelab admission --help`` and ``tracelab run`` read this module without
loading the simulator (``stage.py``, ``sim.py``: NumPy, SciPy).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelab.analysis.common.datapaths import PARAMS_EXPORT, stage_results
from tracelab.analysis.common.stage_api import MAX_HOURS, option
from tracelab.analysis.common.stage_declaration import Stage
from tracelab.analysis.traces import azure2017, traces_feeding

TRACE = azure2017.ID
STAGE = "admission"
#: policies of Table 2 (Cluster Admission §5) and the §6 marginal heuristic
TUNED_POLICIES = ("zeroth", "first", "second", "first-marginal", "second-marginal")
#: one run's result object and table row (measured order of magnitude, with Python overhead)
_RUN_ROW_BYTES = 2_000
#: one live deployment of a simulated cluster with its belief and heap entry
_DEPLOYMENT_BYTES = 2_000
#: one arriving deployment's drawn values (a dozen float64 arrays and their temporaries)
_ARRIVAL_BYTES = 200


@dataclass(frozen=True)
class AdmissionParams:
    """Options of ``tracelab admission``. Defaults: the configuration ``tracelab run`` uses, in the
    paper's regime of a cluster pooling hundreds of deployments (C = 3,000 cores, 8 arrivals per
    hour: the tuned policies hold ~190 deployments at a time on the default sample), 3 runs of 7
    days, bisection until the bracket settles (at most 12 steps), 8 steps per look-ahead horizon,
    no Fig. 1 (``--observations 0 1 5 50`` adds it: two tuned policies per value, each costing
    about what one Table 2 policy does); ~30 CPU s. The page states what these reductions change
    (``reports/pages/admission.py``). :data:`PAPER_ADMISSION_PARAMS` is the reduced benchmark
    configuration. The Cluster Admission paper ran 500 runs of 3 years with 600 steps per
    horizon."""

    cores: int = option(3000, "cluster capacity C (cores)", minimum=1, maximum=10_000_000)
    arrival_rate: float = option(
        8.0,
        "deployment arrivals per hour; 0 = the exported deployment_arrival_rate",
        minimum=0,
        maximum=1e6,
    )
    horizon_hours: float = option(
        168.0,
        "simulated hours per run (the Cluster Admission paper: 26280)",
        minimum=1,
        maximum=MAX_HOURS,
    )
    runs: int = option(
        3, "runs per threshold (tuning) and for verification", minimum=2, maximum=1_000_000
    )
    sla: float = option(
        1e-3, "SLA: largest allowed share of failed scale-outs", minimum=0, maximum=1
    )
    policies: tuple[str, ...] = option(
        ("zeroth", "first", "second"), "policies of Table 2", choices=TUNED_POLICIES
    )
    observations: tuple[int, ...] = option(
        (),
        "Fig. 1: prior observations per deployment (first/second moment, marginal); empty: no "
        "Fig. 1",
        minimum=0,
        maximum=1_000_000,
        allow_empty=True,
    )
    tuning_iterations: int = option(
        12,
        "most bisection steps per policy (the first evaluates the top of the range)",
        minimum=1,
        maximum=60,
    )
    tuning_tolerance: float = option(
        0.002,
        "bisection stops when the utilization at the bracket's ends differs by at most this",
        minimum=0.0,
        maximum=1.0,
    )
    tuning_resolution: float = option(
        1 / 64,
        "bisection also stops when the bracket is this share of the search range (log10 T for "
        "the second moment) or narrower",
        minimum=0.0,
        maximum=1.0,
    )
    lookahead_hours: tuple[float, ...] = option(
        (26280.0, 8760.0, 730.0, 168.0, 24.0),
        "look-ahead horizon of each sub-policy",
        minimum=1,
        maximum=MAX_HOURS,
    )
    lookahead_steps: int = option(
        8,
        "steps per look-ahead horizon (the Cluster Admission paper: 600)",
        minimum=1,
        maximum=5000,
    )
    marginal_cores: float = option(
        1.0, "§6: a deployment expected below this many cores at a step is marginal", minimum=0
    )
    upper_bound: bool = option(True, "also run the no-SLA upper bound (accept while it fits)")
    bootstrap: int = option(
        2000, "BCa bootstrap resamples of the utilization CI", minimum=100, maximum=1_000_000
    )
    prior: str = option(
        "marginal",
        "params records: joint marginal fit or two-stage",
        choices=("marginal", "two-stage"),
    )
    seed: int = option(0, "base seed (runs use (seed, stream, run))", minimum=0)
    importance_sampling: bool = option(
        False, "App. D: redraw runs by badness bucket and weight them by Prop. D.2"
    )
    is_quantiles: tuple[float, ...] = option(
        (0.8, 0.95),
        "App. D: bucket bounds as quantiles of the pilot's badness measure",
        minimum=0,
        maximum=1,
    )
    is_redraw: tuple[float, ...] = option(
        (0.5, 0.25),
        "App. D: redraw probability of each bucket below the top one (one per quantile)",
        minimum=0,
        maximum=0.99,
    )
    is_pilot_runs: int = option(
        1000,
        "App. D: pilot runs (badness measure only) estimating P(bucket)",
        minimum=10,
        maximum=100_000_000,
    )

    def memory_estimate(self) -> tuple[int, str]:
        """Peak bytes: every verified run's row of every policy, scipy's vectorised bootstrap
        (runs x resamples values and indices), the pilot's badness values, one run's arrivals
        drawn up front (rate x horizon; 0 = the exported rate, checked once it is read) and the
        deployments alive in it (at most one per core)."""
        configs = len(self.policies) + 2 * len(self.observations) + 1
        rows = self.runs * configs * _RUN_ROW_BYTES
        bootstrap = self.runs * self.bootstrap * 16
        pilot = self.is_pilot_runs * 8 if self.importance_sampling else 0
        arrivals = self.arrival_rate * self.horizon_hours * _ARRIVAL_BYTES
        alive = self.cores * _DEPLOYMENT_BYTES
        flags = "--runs, --bootstrap, --arrival-rate or --horizon-hours"
        return int(rows + bootstrap + pilot + arrivals + alive), flags


#: the reduced benchmark (``bench/admission.py``): the default regime, 10 runs of 30 days per
#: threshold, 60 steps per look-ahead horizon, Fig. 1 at 0, 1, 5, 50 prior observations
#: (~1,200 CPU s; 30 runs did not fit a shared 2-core machine's hour)
PAPER_ADMISSION_PARAMS = AdmissionParams(
    horizon_hours=720.0,
    runs=10,
    observations=(0, 1, 5, 50),
    lookahead_steps=60,
)


STAGES = (
    Stage(
        name=STAGE,
        command="admission",
        aliases=("admit",),
        scales_out=True,
        help="cluster admission control on the exported Gamma priors (the Cluster Admission paper)",
        traces=traces_feeding(STAGE),
        options=AdmissionParams,
        compute="tracelab.analysis.admission.stage:admission_results",
        page="azure-admission",
        inputs=(PARAMS_EXPORT,),
        outputs=(stage_results(STAGE),),
        upstream=("export",),
        methods="§3.2",
    ),
)
