"""Stage ``placement``, declared: its options and its :class:`Stage` record.

Light on purpose: ``tracelab placement --help`` and ``tracelab run`` read this module without
loading the replay (``stage.py``, ``replay.py``: NumPy, Polars).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelab.analysis.common.datapaths import PARAMS_EXPORT, lake_table, stage_results
from tracelab.analysis.common.stage_api import MAX_HOURS, option
from tracelab.analysis.common.stage_declaration import Stage
from tracelab.analysis.traces import traces_feeding

STAGE = "placement"
BASELINE = "best-fit"
LIFETIME_RECORDS = ("core_lifetime_rate_prior_marginal", "core_lifetime_rate_prior")
POLICIES: tuple[str, ...] = ("best-fit", "la-binary", "las", "lava")
PREDICTORS: tuple[str, ...] = ("model", "oracle", "one-shot")


@dataclass(frozen=True)
class PlacementParams:
    """Options of ``tracelab placement``; the defaults are the small run of ``tracelab run``."""

    source: str = option(
        "vmtable",
        "VM stream: replay of the ingested lake vmtable, or generated from the params document",
        choices=("vmtable", "params"),
    )
    pool_hosts: tuple[int, ...] = option(
        (16, 32, 64),
        "hosts of each pool (one replay per pool and policy)",
        minimum=1,
        maximum=100_000,
    )
    host_cores: int = option(64, "cores of every host", minimum=1, maximum=100_000)
    host_memory_gb: float = option(
        128.0, "memory of every host, GB", minimum=0.5, maximum=1_000_000.0
    )
    target_load: float = option(
        0.6, "mean demand of a pool's VMs as a share of its cores", minimum=0.05, maximum=0.95
    )
    policies: tuple[str, ...] = option(
        POLICIES,
        "placement policies (Best Fit is always run as the baseline; empty: Best Fit alone)",
        choices=POLICIES,
        allow_empty=True,
    )
    predictors: tuple[str, ...] = option(
        ("model", "oracle"),
        "lifetime predictors: the fitted model repredicted with age, the true lifetime, or the "
        "model's prediction at creation never updated",
        choices=PREDICTORS,
        allow_empty=True,
    )
    lifetime_record: str = option(
        LIFETIME_RECORDS[0], "params record of the lifetime-rate prior", choices=LIFETIME_RECORDS
    )
    deployment_history: bool = option(
        True, "update each VM's prediction with what its deployment showed before it"
    )
    feature_history: bool = option(
        True,
        "scale each VM's prior by what its subscription's other deployments and the VMs of its "
        "category and shape showed before it",
    )
    horizon_hours: float = option(
        720.0,
        "predicted remaining lifetimes are means restricted to this horizon",
        minimum=1.0,
        maximum=MAX_HOURS,
    )
    warmup_hours: float = option(
        24.0, "hours before the metrics start", minimum=0.0, maximum=MAX_HOURS
    )
    repredict_minutes: float = option(
        5.0,
        "LAS/LAVA repredict every host's exit at most this often",
        minimum=0.0,
        maximum=MAX_HOURS * 60,
    )
    inflation_every_hours: float = option(
        24.0,
        "hours between inflation simulations (stranding); 0 = none",
        minimum=0.0,
        maximum=MAX_HOURS,
    )
    inflation_draws: int = option(
        128, "VMs drawn from the mix per host per inflation", minimum=0, maximum=1_000_000
    )
    defrag_every_hours: float = option(
        24.0,
        "hours between LARS defragmentation sets; 0 = none",
        minimum=0.0,
        maximum=MAX_HOURS,
    )
    defrag_hosts: int = option(
        4, "hosts drained per defragmentation set", minimum=1, maximum=100_000
    )
    migration_slots: int = option(
        3, "live migrations in flight at once", minimum=1, maximum=100_000
    )
    migration_minutes: float = option(
        20.0, "duration of one live migration", minimum=0.0, maximum=MAX_HOURS * 60
    )
    lava_fill: float = option(
        0.9, "LAVA: an open host turns recycling above this share", minimum=0.1, maximum=1.0
    )
    deadline_factor: float = option(
        1.1, "LAVA: deadline = factor x the class's upper bound", minimum=1.0, maximum=1000.0
    )
    lava_strict: bool = option(
        False,
        "LAVA: a recycling host takes a VM of its own class or higher only when nothing else "
        "fits (LAVA paper §4.3's 'only ... one lifetime class lower'); off: such a host is one of "
        "'any non-empty host' in §4.3's scoring order",
    )
    seed: int = option(0, "seed of pool assignment, generation and inflation mixes", minimum=0)

    def options_problem(self) -> str | None:
        """A sentence when a policy other than Best Fit is asked for without a predictor."""
        if not self.predictors and set(self.policies) - {BASELINE}:
            return "--predictors is empty: give at least one for the policies other than Best Fit"
        return None


#: the benchmark-size configuration: 24 pools as in LAVA paper Fig. 6, generated from the params
PAPER_PLACEMENT_PARAMS = PlacementParams(
    source="params",
    pool_hosts=(150, 200, 250, 300) * 6,
    predictors=("model", "oracle"),
    repredict_minutes=60.0,
)


STAGES = (
    Stage(
        name=STAGE,
        command="placement",
        aliases=("place",),
        scales_out=True,
        help="lifetime-aware VM placement: Best Fit, LA-Binary, LAS, LAVA, LARS (the LAVA paper)",
        traces=traces_feeding(STAGE),
        options=PlacementParams,
        compute="tracelab.analysis.placement.stage:placement_results",
        page="azure-placement",
        inputs=(PARAMS_EXPORT, lake_table("vmtable")),
        outputs=(stage_results(STAGE),),
        upstream=("ingest", "export"),
        methods="§3.3",
    ),
)
