"""The azure-2017 cluster admission page (“On the cluster admission problem” §5–6: Table 2, Fig. 1, the upper bound)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelab.reports.figures import new_axes
from tracelab.reports.model import Figure, HtmlTable, InputsMissing, Number, PageContext, Section

STAGE = "admission"
_POLICY_COLUMNS = (
    "policy",
    "observations",
    "threshold",
    "threshold_unit",
    "utilization",
    "utilization_ci_low",
    "utilization_ci_high",
    "failure_rate",
    "failure_rate_ci_high",
    "sla_met",
    "gain_vs_zeroth",
)

#: what “On the cluster admission problem” reports; its numerals are not legible in our copy of the text (the extraction
#: dropped every number inside the tables and formulas), so the page quotes the findings
PAPER_SETUP = (
    "“On the cluster admission problem” §5.2 simulates one cluster for 3 years, 500 runs, deployments arriving as a Poisson "
    "process with parameters drawn from the fitted Gamma priors, thresholds tuned by binary search "
    "to an SLA on the scale-out failure rate (stricter than common practice), five sub-policies "
    "(3 years, 1 year, 1 month, 1 week, 24 hours; 600 steps each), importance sampling of the rare "
    "failing runs (App. D) and BCa bootstrap CIs. The values of C, the arrival rate and the SLA are "
    "not legible in our copy of the seed."
)
PAPER_TABLE2 = (
    "“On the cluster admission problem” Table 2: the first-moment policy raises utilization over the zeroth-moment baseline "
    "by several percentage points and the second-moment policy by about the same; the two are "
    "close because failures come from a few runs that admit too many large, long-lived "
    "deployments early, when little is known about them (§5.3). The table's numbers are not "
    "legible in our copy of the seed."
)
PAPER_FIG1 = (
    "“On the cluster admission problem” Fig. 1: with the marginal heuristic, one prior observation per deployment already "
    "raises utilization markedly, and 50 observations bring the second-moment policy to a large "
    "share of the no-SLA upper bound (§6.2). The figure's values are not legible in our copy."
)


@dataclass(frozen=True)
class PolicyRow:
    """One verified policy of this run."""

    policy: str
    observations: int
    threshold: float
    threshold_unit: str
    utilization: float
    ci_low: float
    ci_high: float
    failure_rate: float
    failure_rate_ci_high: float
    sla_met: bool | None
    gain_vs_zeroth: float | None
    #: the regime (issue 24): time-mean live deployments, accepted share of arrivals
    mean_deployments: float = float("nan")
    accepted_share: float = float("nan")
    #: the tuning bracket's infeasible end (None: upper bound, or outputs without it)
    threshold_high: float | None = None
    tuning_settled: bool | None = None


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class AdmissionNumbers:
    """Everything the page states about this run, read from the stage's outputs."""

    cores: int
    arrival_rate_per_hour: float
    horizon_hours: float
    runs: int
    sla: float
    prior: str
    records: tuple[str, ...]
    lookahead_steps: int
    tuning_tolerance: float
    tuning_resolution: float
    importance_sampling: bool
    #: App. D's scheme as ``ImportanceSampling.to_dict()`` wrote it (None: plain Monte Carlo)
    importance: dict[str, Any] | None
    table2: tuple[PolicyRow, ...]
    figure1: tuple[PolicyRow, ...]
    upper_bound: PolicyRow | None
    tuning: pl.DataFrame


def _row(d: dict[str, Any]) -> PolicyRow:
    return PolicyRow(
        policy=str(d["policy"]),
        observations=int(d["observations"]),
        threshold=float(d["threshold"]),
        threshold_unit=str(d["threshold_unit"]),
        utilization=float(d["utilization"]),
        ci_low=float(d["utilization_ci_low"]),
        ci_high=float(d["utilization_ci_high"]),
        failure_rate=float(d["failure_rate"]),
        failure_rate_ci_high=float(d["failure_rate_ci_high"]),
        sla_met=None if d["sla_met"] is None else bool(d["sla_met"]),
        gain_vs_zeroth=_opt_float(d["gain_vs_zeroth"]),
        mean_deployments=float(d.get("mean_deployments", float("nan"))),
        accepted_share=float(d.get("accepted_share", float("nan"))),
        threshold_high=_opt_float(d.get("threshold_high")),
        tuning_settled=None if d.get("tuning_settled") is None else bool(d["tuning_settled"]),
    )


def admission_numbers(stage_dir: Path) -> AdmissionNumbers:
    """The page's numbers from ``summary.json``, ``policies.parquet`` and ``tuning.parquet``."""
    files = [stage_dir / n for n in ("summary.json", "policies.parquet", "tuning.parquet")]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise InputsMissing(f"missing {', '.join(missing)} in results/azure-2017/{STAGE}")
    summary = json.loads(files[0].read_text(encoding="utf-8"))
    policies = pl.read_parquet(files[1])
    lacking = [c for c in _POLICY_COLUMNS if c not in policies.columns]
    if lacking:
        raise InputsMissing(f"policies.parquet lacks column(s) {', '.join(lacking)}")
    rows = [_row(d) for d in policies.iter_rows(named=True)]
    upper = summary.get("upper_bound")
    return AdmissionNumbers(
        cores=int(summary["cores"]),
        arrival_rate_per_hour=float(summary["arrival_rate_per_hour"]),
        horizon_hours=float(summary["horizon_hours"]),
        runs=int(summary["runs"]),
        sla=float(summary["sla"]),
        prior=str(summary["prior"]),
        records=tuple(summary["records"]),
        lookahead_steps=int(summary["params"]["lookahead_steps"]),
        tuning_tolerance=float(summary["params"].get("tuning_tolerance", float("nan"))),
        tuning_resolution=float(summary["params"].get("tuning_resolution", float("nan"))),
        importance_sampling=bool(summary["importance_sampling"]),
        importance=summary.get("importance"),
        table2=tuple(r for r in rows if r.observations == 0),
        figure1=tuple(r for r in rows if r.policy.endswith("marginal")),
        upper_bound=None if upper is None else _row(upper),
        tuning=pl.read_parquet(files[2]),
    )


def _pct(x: float | None) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{100 * x:.1f}%"


def _table2(n: AdmissionNumbers) -> HtmlTable:
    rows = [*n.table2, *([n.upper_bound] if n.upper_bound else [])]
    return HtmlTable(
        "Tuned policies, verified on fresh seeds (Table 2)",
        (
            "policy",
            "threshold T",
            "utilization",
            "BCa 95% CI",
            "failure rate",
            "SLA met",
            "gain",
            "deployments (time-mean)",
            "accepted",
        ),
        tuple(
            (
                "no-SLA upper bound" if r.policy == "accept-all" else r.policy,
                _threshold_cell(r),
                _pct(r.utilization),
                f"[{_pct(r.ci_low)}, {_pct(r.ci_high)}]",
                f"{r.failure_rate:.2e}",
                "–" if r.sla_met is None else ("yes" if r.sla_met else "NO"),
                _pct(r.gain_vs_zeroth),
                f"{r.mean_deployments:,.1f}",
                _pct(r.accepted_share),
            )
            for r in rows
        ),
        highlight_rows=tuple(i for i, r in enumerate(rows) if r.sla_met is False),
    )


def _threshold_cell(r: PolicyRow) -> str:
    """T with the bisection bracket's infeasible end (T is the largest feasible point found)."""
    if r.policy == "accept-all":
        return "–"
    bracket = "" if r.threshold_high is None else f" (< {r.threshold_high:.4g} infeasible)"
    return f"{r.threshold:.4g}{bracket} ({r.threshold_unit})"


def _regime(n: AdmissionNumbers) -> tuple[str | Number, ...]:
    """The regime the tuned policies ran in: how many deployments they pool (issue 24)."""
    deps = [r.mean_deployments for r in n.table2]
    shares = [r.accepted_share for r in n.table2]
    return (
        " Regime: the tuned policies hold ",
        Number("min_mean_deployments", min(deps), ",.0f"),
        "–",
        Number("max_mean_deployments", max(deps), ",.0f", "deployments"),
        " at a time (time-mean over the verification runs, from an empty cluster) and accept ",
        Number("min_accepted_share", min(shares), ".1%"),
        "–",
        Number("max_accepted_share", max(shares), ".1%"),
        " of arriving deployments.",
    )


def _table2_figure(ctx: PageContext, n: AdmissionNumbers) -> list[Figure]:
    with new_axes(
        ctx.out_dir,
        "admission_table2",
        alt="Utilization of each tuned policy with its BCa 95% CI and the no-SLA upper bound.",
        caption="Utilization (mean active cores / C) per tuned policy, BCa 95% CI over runs; the "
        "dashed line is the no-SLA upper bound.",
    ) as (ax, made):
        rows = n.table2
        x = np.arange(len(rows))
        util = np.array([r.utilization for r in rows])
        err = np.array(
            [[r.utilization - r.ci_low for r in rows], [r.ci_high - r.utilization for r in rows]]
        )
        ax.bar(x, util, yerr=np.maximum(err, 0.0), capsize=4, color="tab:blue")
        if n.upper_bound is not None:
            ax.axhline(
                n.upper_bound.utilization, color="black", linestyle="--", label="upper bound"
            )
            # above the bars and the line, so it hides no error bar
            ax.legend(fontsize=8, loc="upper right")
        ax.set_xticks(x, [r.policy for r in rows])
        ax.set_ylim(0.0, 1.2)
        ax.set_ylabel("utilization")
    return made


def _figure1(ctx: PageContext, n: AdmissionNumbers) -> list[Figure]:
    with new_axes(
        ctx.out_dir,
        "admission_figure1",
        alt="Utilization against prior observations per deployment, first and second moment.",
        caption="Utilization of the tuned first- and second-moment policies (marginal heuristic) "
        "against the number of prior observations per deployment (“On the cluster admission problem” Fig. 1).",
    ) as (ax, made):
        for policy in sorted({r.policy for r in n.figure1}):
            rows = sorted(
                (r for r in n.figure1 if r.policy == policy), key=lambda r: r.observations
            )
            ax.errorbar(
                [r.observations for r in rows],
                [r.utilization for r in rows],
                yerr=[
                    [max(r.utilization - r.ci_low, 0.0) for r in rows],
                    [max(r.ci_high - r.utilization, 0.0) for r in rows],
                ],
                marker="o",
                capsize=3,
                label=policy,
            )
        if n.upper_bound is not None:
            ax.axhline(
                n.upper_bound.utilization, color="black", linestyle="--", label="upper bound"
            )
        ax.set_xlabel("prior observations per deployment")
        ax.set_ylabel("utilization")
        ax.legend(fontsize=8)
    return made


def _tuning_figure(ctx: PageContext, n: AdmissionNumbers) -> list[Figure]:
    with new_axes(
        ctx.out_dir,
        "admission_tuning",
        alt="Scale-out failure rate at each bisection step per policy, with the SLA.",
        caption="Bisection on T: failure rate on the tuning seeds at each step (open = above "
        "the SLA); zero rates are drawn at the bottom of the axis.",
    ) as (ax, made):
        floor = n.sla / 100 if n.sla > 0 else 1e-7
        for (policy, obs), part in n.tuning.group_by(
            ["policy", "observations"], maintain_order=True
        ):
            steps = part["iteration"].to_numpy()
            rate = np.maximum(part["failure_rate"].to_numpy(), floor)
            ax.plot(steps, rate, marker="o", label=f"{policy} ({obs} obs.)")
        ax.axhline(max(n.sla, floor), color="red", linestyle=":", label="SLA")
        ax.set_yscale("log")
        ax.set_xlabel("bisection step")
        ax.set_ylabel("failure rate")
        ax.legend(fontsize=7)
    return made


def _importance_table(imp: dict[str, Any]) -> HtmlTable:
    bounds = [float("-inf"), *imp["thresholds"], float("inf")]
    return HtmlTable(
        "Badness buckets (App. D, Table 4)",
        ("bucket", "BM range", "P(bucket), pilot", "redraw probability", "Q(bucket)", "weight"),
        tuple(
            (
                str(i + 1),
                f"[{bounds[i]:.3g}, {bounds[i + 1]:.3g})",
                f"{imp['nominal'][i]:.3f}",
                f"{imp['redraw'][i]:.2f}",
                f"{imp['sampling'][i]:.3f}",
                f"{imp['weights'][i]:.3f}",
            )
            for i in range(len(imp["nominal"]))
        ),
    )


def _importance_section(imp: dict[str, Any]) -> Section:
    return Section(
        title="Importance sampling (App. D)",
        this_run=(
            "Each run's deployments are pre-drawn and scored by the badness measure BM (the "
            "largest monthly load / C of the simplified monthly simulation of Def. D.1, with "
            f"Cantelli factor k = {imp['cantelli_k']:.3g} and {imp['month_hours']:g}-hour months); "
            "bucket bounds are quantiles of BM over ",
            Number("pilot_runs", float(imp["pilot_runs"]), ",.0f"),
            " pilot runs, which also give P(bucket). A run in a lower bucket is redrawn with the "
            "bucket's probability, blocking the buckets below; runs are weighted by "
            "P(bucket) / Q(bucket) (Prop. D.2) in the failure rates and utilizations above.",
        ),
        paper="“On the cluster admission problem” App. D: three BM buckets, P(bucket) from a "
        "pilot, redraw probabilities from 500 runs per bucket under the second-moment policy; "
        "its values (Table 4) are not legible in our copy.",
        tables=(_importance_table(imp),),
    )


def _setup_section(n: AdmissionNumbers) -> Section:
    return Section(
        title="Set-up of this run",
        this_run=(
            "One cluster of C = ",
            Number("cores", float(n.cores), ",.0f", "cores"),
            ", deployments arriving at λ = ",
            Number("arrival_rate", n.arrival_rate_per_hour, ".4g", "per hour"),
            ", ",
            Number("runs", float(n.runs), ".0f"),
            " runs of ",
            Number("horizon_hours", n.horizon_hours, ",.0f", "hours"),
            " per threshold and for verification, SLA: at most ",
            Number("sla", n.sla, ".3g"),
            f" of scale-outs may fail; {n.lookahead_steps} steps per look-ahead horizon; priors "
            f"from the {'joint marginal' if n.prior == 'marginal' else 'two-stage'} fit "
            f"(params records {', '.join(n.records)}). Importance sampling: "
            f"{'yes (App. D, below)' if n.importance_sampling else 'no (plain Monte Carlo)'}.",
            *(_regime(n) if n.table2 else ()),
        ),
        paper=PAPER_SETUP,
    )


def admission_sections(ctx: PageContext) -> Sequence[Section]:
    """“On the cluster admission problem” Table 2, Fig. 1 and the tuning, from ``results/azure-2017/admission``."""
    n = admission_numbers(ctx.results(STAGE))
    if not n.table2:
        raise InputsMissing("policies.parquet has no policy without prior observations")
    zeroth = next((r for r in n.table2 if r.policy == "zeroth"), None)
    best = max(n.table2, key=lambda r: r.utilization)
    sections = [
        _setup_section(n),
        Section(
            title="Tuned policies (“On the cluster admission problem” Table 2)",
            this_run=(
                f"Best policy {best.policy}: utilization ",
                Number("best_utilization", best.utilization, ".3f"),
                " against the zeroth-moment baseline's ",
                Number("zeroth_utilization", zeroth.utilization if zeroth else float("nan"), ".3f"),
                " and the no-SLA upper bound ",
                Number(
                    "upper_bound",
                    n.upper_bound.utilization if n.upper_bound else float("nan"),
                    ".3f",
                ),
                ". ",
                Number("sla_met", float(sum(bool(r.sla_met) for r in n.table2)), ".0f"),
                f" of {len(n.table2)} tuned policies meet the SLA on the verification seeds"
                + (
                    " (runs weighted by importance sampling, App. D)."
                    if n.importance_sampling
                    else "; with few runs and plain Monte Carlo a small SLA cannot be resolved "
                    "(a policy tuned to zero failures on the tuning seeds can fail on others)."
                ),
            ),
            paper=PAPER_TABLE2,
            figures=tuple(_table2_figure(ctx, n)),
            tables=(_table2(n),),
        ),
    ]
    if n.importance is not None:
        sections.append(_importance_section(n.importance))
    if n.figure1:
        sections.append(
            Section(
                title="Value of prior observations (“On the cluster admission problem” Fig. 1)",
                this_run=(
                    "Tuned first- and second-moment policies with the marginal heuristic at ",
                    ", ".join(str(k) for k in sorted({r.observations for r in n.figure1})),
                    " prior observations per deployment (",
                    Number("figure1_points", float(len(n.figure1)), ".0f"),
                    " tuned policies).",
                ),
                paper=PAPER_FIG1,
                figures=tuple(_figure1(ctx, n)),
            )
        )
    tuned = list({(r.policy, r.observations): r for r in (*n.table2, *n.figure1)}.values())
    sections.append(
        Section(
            title="Tuning by bisection",
            this_run=(
                "Failure rate on the tuning seeds at each bisection step (",
                Number("tuning_steps", float(n.tuning.height), ".0f"),
                " steps in all); verification uses other seeds. Bisection stops when the "
                "utilization at the bracket's two ends differs by at most ",
                Number("tuning_tolerance", n.tuning_tolerance, ".3g"),
                " or the bracket is at most ",
                Number("tuning_resolution", n.tuning_resolution, ".3g"),
                " of the search range; ",
                Number("tuning_settled", float(sum(bool(r.tuning_settled) for r in tuned)), ".0f"),
                f" of {len(tuned)} tuned policies settled before the step limit.",
            ),
            paper="“On the cluster admission problem” §5.2 tunes T per policy by binary search to meet the SLA.",
            figures=tuple(_tuning_figure(ctx, n)),
        )
    )
    return sections
