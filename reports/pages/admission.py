"""The azure-2017 cluster admission page (“On the cluster admission problem” §5–6: Table 2, Fig. 1, the upper bound)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from matplotlib.patches import Patch

from tracelab.analysis.admission.options import TRACE, AdmissionParams
from tracelab.analysis.common.datapaths import stage_results
from tracelab.analysis.common.intervals import ZERO_EVENT_BOUND, Estimate
from tracelab.reports.figures import new_axes
from tracelab.reports.model import (
    Figure,
    HtmlTable,
    InputsMissing,
    Number,
    PageContext,
    PageSpec,
    Paragraph,
    Section,
)
from tracelab.reports.numfmt import estimate_text, fmt, fmt_ci, fmt_pct
from tracelab.reports.run_parameters import (
    differences,
    differences_text,
    parameters_section,
    show,
)

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
    "failure_rate_ci_low",
    "failure_rate_ci_high",
    "scaleouts",
    "failures",
    "sla_met",
    "gain_vs_zeroth",
)
#: “On the cluster admission problem” §5.2's configuration, option by option (what is legible in
#: our copy); the page compares this run's recorded parameters with it
PAPER_CONFIGURATION: dict[str, Any] = {
    "horizon_hours": 26280.0,
    "runs": 500,
    "lookahead_steps": 600,
    "observations": (0, 1, 5, 50),
    "importance_sampling": True,
}

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
    failure_rate_ci_low: float
    failure_rate_ci_high: float
    scaleouts: int
    failures: int
    sla_met: bool | None
    gain_vs_zeroth: float | None
    #: the regime: time-mean live deployments, accepted share of arrivals
    mean_deployments: float = float("nan")
    accepted_share: float = float("nan")
    #: the tuning bracket's infeasible end (None: upper bound, or outputs without it)
    threshold_high: float | None = None
    tuning_settled: bool | None = None
    #: the gain's paired interval over the verification runs (None: not computed)
    gain_ci_low: float | None = None
    gain_ci_high: float | None = None
    #: verification arrivals that fit now but a look-ahead step rejected (None: not recorded)
    lookahead_rejections: int | None = None
    #: the failure rate as the stage states it (None: outputs written before it stored one)
    failure_estimate: Estimate | None = None


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
    #: summary.json's parameters record (options and what the stage derived)
    summary: dict[str, Any]
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
        failure_rate_ci_low=float(d["failure_rate_ci_low"]),
        failure_rate_ci_high=float(d["failure_rate_ci_high"]),
        scaleouts=int(d["scaleouts"]),
        failures=int(d["failures"]),
        sla_met=None if d["sla_met"] is None else bool(d["sla_met"]),
        gain_vs_zeroth=_opt_float(d["gain_vs_zeroth"]),
        mean_deployments=float(d.get("mean_deployments", float("nan"))),
        accepted_share=float(d.get("accepted_share", float("nan"))),
        threshold_high=_opt_float(d.get("threshold_high")),
        tuning_settled=None if d.get("tuning_settled") is None else bool(d["tuning_settled"]),
        gain_ci_low=_opt_float(d.get("gain_ci_low")),
        gain_ci_high=_opt_float(d.get("gain_ci_high")),
        lookahead_rejections=(
            None if d.get("lookahead_rejections") is None else int(d["lookahead_rejections"])
        ),
        failure_estimate=(
            None
            if d.get("failure_rate_interval") is None
            else Estimate.from_dict(d["failure_rate_interval"])
        ),
    )


def admission_numbers(stage_dir: Path) -> AdmissionNumbers:
    """The page's numbers from ``summary.json``, ``policies.parquet`` and ``tuning.parquet``."""
    files = [stage_dir / n for n in ("summary.json", "policies.parquet", "tuning.parquet")]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise InputsMissing(f"missing {', '.join(missing)} in results/{TRACE}/{STAGE}")
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
        lookahead_steps=int(summary.get("parameters", {}).get("lookahead_steps", 0)),
        tuning_tolerance=float(_recorded(summary).get("tuning_tolerance", float("nan"))),
        tuning_resolution=float(_recorded(summary).get("tuning_resolution", float("nan"))),
        importance_sampling=bool(summary["importance_sampling"]),
        importance=summary.get("importance"),
        summary=summary,
        table2=tuple(r for r in rows if r.observations == 0),
        figure1=tuple(r for r in rows if r.policy.endswith("marginal")),
        upper_bound=None if upper is None else _row(upper),
        tuning=pl.read_parquet(files[2]),
    )


def _pct(x: float | None) -> str:
    return fmt_pct(x)


def _failure_estimate(r: PolicyRow) -> Estimate:
    if r.failure_estimate is None:
        raise InputsMissing(
            "admission's results have no failure_rate_interval (an older `tracelab admit` wrote "
            "them)"
        )
    return r.failure_estimate


def failure_text(r: PolicyRow) -> str:
    """The failure rate as the stage stated it: its interval over runs, or, without any failure
    of plain Monte Carlo runs, the one-sided bound with the count of scale-outs."""
    e = _failure_estimate(r)
    if e.method == ZERO_EVENT_BOUND:
        return estimate_text(e)
    return fmt_ci(e.value, e.low, e.high)


def failure_upper(r: PolicyRow) -> float:
    """The upper end of the interval :func:`failure_text` shows (one number on the page)."""
    return _failure_estimate(r).high


def _horizon_change(rec: Mapping[str, Any]) -> str:
    hours = float(rec["horizon_hours"])
    return (
        f"each run covers {fmt(hours)} h from an empty cluster ({fmt_pct(hours / 26280.0)} of "
        "the paper's 3 years): utilization and deployments are time-means that include the "
        "cluster filling up, and no deployment outlives its run"
    )


def _runs_change(rec: Mapping[str, Any]) -> str:
    runs = int(rec["runs"])
    return (
        f"T is tuned on the failures of {runs} runs and verified on {runs} others: the "
        f"utilization intervals are BCa over {runs} runs, and policies whose intervals overlap "
        "are not ordered by this run"
    )


def _steps_change(rec: Mapping[str, Any]) -> str:
    steps = int(rec["lookahead_steps"])
    hours = [float(h) for h in rec["lookahead_hours"]]

    def spacing(k: int) -> str:
        return ", ".join(f"{fmt(h / k)} h" for h in hours)

    return (
        f"the policies check the cluster's moments {steps} times per look-ahead horizon, every "
        f"{spacing(steps)} (the paper's 600 steps: every {spacing(600)}): a peak between two "
        "checked points is not seen"
    )


def _observations_change(rec: Mapping[str, Any]) -> str:
    observations = [int(k) for k in rec["observations"]]
    paper = list(PAPER_CONFIGURATION["observations"])
    if not observations:
        return (
            "Fig. 1 is not run: each value of --observations adds two tuned policies (first "
            "and second moment with the marginal heuristic), each costing about what one "
            f"Table 2 policy does; --observations {','.join(map(str, paper))} runs the "
            "paper's points"
        )
    missing = [k for k in paper if k not in observations]
    curve = "" if len(observations) >= 2 else "; one point per policy draws no curve"
    lacking = f"; without {', '.join(map(str, missing))} prior observations" if missing else ""
    return f"Fig. 1 has {len(observations)} point(s) per policy{lacking}{curve}"


def _importance_change(rec: Mapping[str, Any]) -> str:
    return (
        "plain Monte Carlo: the runs in which many large, long-lived deployments arrive early "
        "(the source of most failures, §5.3) come at their natural frequency instead of being "
        "drawn more often and weighted (App. D), so the failure rates rest on few failures"
    )


#: what each option of §5.2's configuration does to this run's numbers when it differs
_CHANGES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "horizon_hours": _horizon_change,
    "runs": _runs_change,
    "lookahead_steps": _steps_change,
    "observations": _observations_change,
    "importance_sampling": _importance_change,
}


def reductions(recorded: Mapping[str, Any]) -> tuple[tuple[str, str, str, str], ...]:
    """(option, this run, §5.2, what it changes) for every recorded option that differs from
    §5.2's configuration, generated from the record (never written by hand)."""
    return tuple(
        (d.name, show(d.run), show(d.paper), _CHANGES[d.name](recorded))
        for d in differences(recorded, PAPER_CONFIGURATION)
    )


def _reductions_table(recorded: Mapping[str, Any]) -> HtmlTable | None:
    rows = reductions(recorded)
    if not rows:
        return None
    return HtmlTable(
        "What this run reduces from “On the cluster admission problem” §5.2, and what that "
        "changes (from the recorded options)",
        ("option", "this run", "§5.2", "what it changes"),
        rows,
    )


def best_meeting_sla(rows: Sequence[PolicyRow]) -> PolicyRow | None:
    """The highest utilization among the policies that met the SLA on the verification seeds."""
    met = [r for r in rows if r.sla_met]
    return max(met, key=lambda r: r.utilization) if met else None


def _table2(n: AdmissionNumbers) -> HtmlTable:
    rows = [*n.table2, *([n.upper_bound] if n.upper_bound else [])]
    return HtmlTable(
        "Tuned policies, verified on fresh seeds (Table 2); utilization: mean [BCa 95% CI] over "
        "runs; failure rate: failed / all scale-outs [95% CI]; deployments: time-mean held",
        (
            "policy",
            "threshold T",
            "utilization",
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
                fmt_ci(r.utilization, r.ci_low, r.ci_high),
                failure_text(r),
                "–" if r.sla_met is None else ("yes" if r.sla_met else "NO"),
                _pct(r.gain_vs_zeroth),
                fmt(r.mean_deployments),
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
    """The regime the tuned policies ran in: how many deployments they pool."""
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
    rows = n.table2
    with new_axes(
        ctx.out_dir,
        "admission_table2",
        alt="Utilization of each tuned policy with its BCa 95% CI and the no-SLA upper bound; "
        "policies that missed the SLA in red.",
        caption="Utilization (mean active cores / C) per tuned policy, BCa 95% CI over runs; red: "
        "missed the SLA on the verification seeds; the dashed line is the no-SLA upper bound. "
        "The axis spans the values, not 0 to 1: the policies differ by hundredths.",
        data=(
            ("policy", "utilization", "CI low", "CI high", "met the SLA"),
            [(r.policy, r.utilization, r.ci_low, r.ci_high, r.sla_met) for r in rows],
        ),
    ) as (ax, made):
        x = np.arange(len(rows))
        missed = [r.sla_met is False for r in rows]
        for xi, r, miss in zip(x, rows, missed, strict=True):
            # points with intervals, not bars: a bar's length from a cut axis would mislead
            ax.errorbar(
                xi,
                r.utilization,
                yerr=[[max(r.utilization - r.ci_low, 0.0)], [max(r.ci_high - r.utilization, 0.0)]],
                fmt="o",
                capsize=5,
                markersize=7,
                color="tab:red" if miss else "tab:blue",
            )
        if n.upper_bound is not None:
            ax.axhline(
                n.upper_bound.utilization, color="black", linestyle="--", label="upper bound"
            )
        handles = ax.get_legend_handles_labels()[0]
        if any(missed):
            handles.append(Patch(color="tab:red", label="missed the SLA"))
        if handles:
            ax.legend(handles=handles, fontsize=8.5, loc="best")
        ax.set_xticks(x, [r.policy for r in rows])
        ax.set_xlim(-0.6, len(rows) - 0.4)
        ax.set_ylim(*_utilization_range(n))
        ax.set_ylabel("utilization (active cores / C)")
    return made


def _utilization_range(n: AdmissionNumbers) -> tuple[float, float]:
    """The values and intervals with a margin of a fifth of their span (at least 0.01)."""
    values = [v for r in n.table2 for v in (r.ci_low, r.ci_high, r.utilization)]
    if n.upper_bound is not None:
        values.append(n.upper_bound.utilization)
    finite = [v for v in values if np.isfinite(v)] or [0.0, 1.0]
    lo, hi = min(finite), max(finite)
    pad = max((hi - lo) / 5, 0.01)
    return max(lo - pad, 0.0), hi + pad


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
    groups = list(n.tuning.group_by(["policy", "observations"], maintain_order=True))
    cols = min(len(groups), 3)
    rows = -(-len(groups) // cols)
    floor = n.sla / 10 if n.sla > 0 else 1e-7
    with new_axes(
        ctx.out_dir,
        "admission_tuning",
        alt="Scale-out failure rate at each bisection step, one panel per policy, with the SLA.",
        caption="Bisection on T, one panel per policy: failure rate on the tuning seeds at each "
        f"step (filled: met the SLA); a step without failures is drawn as ▽ at {fmt(floor)} "
        "(a tenth of the SLA), not at its true 0, which a log axis cannot show.",
        ncols=cols,
        nrows=rows,
        size=(3.6 * cols, 2.6 * rows + 0.4),
    ) as (axes, made):
        panels = [ax for row in axes for ax in row]
        for ax, ((policy, obs), part) in zip(panels, groups, strict=False):
            steps = part["iteration"].to_numpy()
            rate = part["failure_rate"].to_numpy()
            ok = part["feasible"].to_numpy().astype(bool)
            ax.plot(steps, np.maximum(rate, floor), color="tab:blue", linewidth=0.8)
            ax.scatter(steps[ok & (rate > 0)], rate[ok & (rate > 0)], color="tab:blue", zorder=3)
            ax.scatter(steps[~ok], rate[~ok], facecolors="none", edgecolors="tab:blue", zorder=3)
            ax.scatter(
                steps[rate == 0],
                np.full(int((rate == 0).sum()), floor),
                marker="v",
                color="tab:blue",
                zorder=3,
            )
            ax.axhline(n.sla, color="red", linestyle=":", linewidth=1)
            ax.set_yscale("log")
            ax.set_ylim(floor / 2, 1.0)
            ax.set_xticks(steps)
            ax.set_title(f"{policy} ({obs} obs.)", fontsize=9)
            ax.set_xlabel("bisection step", fontsize=8)
            ax.set_ylabel("failure rate", fontsize=8)
        for ax in panels[len(groups) :]:
            ax.set_visible(False)
    return made


def tuning_brackets(tuning: pl.DataFrame) -> dict[str, tuple[float, float]]:
    """Per policy, the bracket bisection left: (largest threshold that met the SLA, smallest that
    did not); NaN where no step fell on that side."""
    out: dict[str, tuple[float, float]] = {}
    for (policy, obs), part in tuning.group_by(["policy", "observations"], maintain_order=True):
        ok = part.filter(pl.col("feasible"))["threshold"]
        bad = part.filter(~pl.col("feasible"))["threshold"]
        low = float(ok.max()) if ok.len() else float("nan")  # type: ignore[arg-type]
        high = float(bad.min()) if bad.len() else float("nan")  # type: ignore[arg-type]
        out[f"{policy} ({obs} obs.)"] = (low, high)
    return out


def _edge(x: float) -> str:
    return fmt(x) if np.isfinite(x) else ("−∞" if x < 0 else "∞")


def _importance_table(imp: dict[str, Any]) -> HtmlTable:
    bounds = [float("-inf"), *imp["thresholds"], float("inf")]
    return HtmlTable(
        "Badness buckets (App. D, Table 4)",
        ("bucket", "BM range", "P(bucket), pilot", "redraw probability", "Q(bucket)", "weight"),
        tuple(
            (
                str(i + 1),
                f"[{_edge(bounds[i])}, {_edge(bounds[i + 1])})",
                fmt(imp["nominal"][i]),
                fmt(imp["redraw"][i]),
                fmt(imp["sampling"][i]),
                fmt(imp["weights"][i]),
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
            f"Cantelli factor k = {fmt(imp['cantelli_k'])} and {fmt(imp['month_hours'])}-hour "
            "months); "
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


def _cluster_shape(n: AdmissionNumbers, key: str) -> Paragraph:
    """C, the arrival rate, the runs and their horizon (keys prefixed with ``key``)."""
    return (
        Number(f"{key}cores", float(n.cores), ",.0f", "cores"),
        ", deployments arriving at λ = ",
        Number(f"{key}arrival_rate", n.arrival_rate_per_hour, "", "per hour"),
        ", ",
        Number(f"{key}runs", float(n.runs), ".0f"),
        " runs of ",
        Number(f"{key}horizon_hours", n.horizon_hours, ",.0f", "hours"),
    )


def _setup_section(n: AdmissionNumbers) -> Section:
    recorded = n.summary.get("parameters", {})
    return Section(
        title="Set-up of this run",
        this_run=(
            "One cluster of C = ",
            *_cluster_shape(n, ""),
            " per threshold and for verification, SLA: at most ",
            Number("sla", n.sla),
            f" of scale-outs may fail; {n.lookahead_steps} steps per look-ahead horizon; priors "
            f"from the {'joint marginal' if n.prior == 'marginal' else 'two-stage'} fit "
            f"(params records {', '.join(n.records)}). Importance sampling: "
            f"{'yes (App. D, below)' if n.importance_sampling else 'no (plain Monte Carlo)'}. "
            + _differences_sentence(recorded),
            *(_regime(n) if n.table2 else ()),
        ),
        paper=PAPER_SETUP,
        tables=tuple(t for t in (_reductions_table(recorded),) if t is not None),
    )


def _differences_sentence(recorded: Mapping[str, Any]) -> str:
    diffs = differences(recorded, PAPER_CONFIGURATION)
    if not diffs:
        return differences_text(diffs, "§5.2")
    return (
        f"This run reduces {len(diffs)} of §5.2's settings ("
        + ", ".join(d.name for d in diffs)
        + "); the table below says what each changes."
    )


def _headline(n: AdmissionNumbers, zeroth: PolicyRow | None) -> Paragraph:
    """The best policy among those that met the SLA, or that none did; never a bare maximum."""
    best = best_meeting_sla(n.table2)
    met = sum(bool(r.sla_met) for r in n.table2)
    count: Paragraph = (
        Number("sla_met", float(met), ".0f"),
        f" of {len(n.table2)} tuned policies met the SLA (failure rate ≤ {fmt(n.sla)}) on the "
        "verification seeds.",
    )
    if best is None:
        top = max(n.table2, key=lambda r: r.utilization)
        return (
            "No tuned policy met the SLA on the verification seeds, so none is best here; the "
            f"highest utilization, {top.policy}'s ",
            Number("top_utilization", top.utilization),
            f", came with a failure rate of {failure_text(top)}. ",
            *count,
        )
    high = failure_upper(best)
    caveat = (
        ""
        if high <= n.sla
        else f" ({best.failures} failures in {best.scaleouts:,} scale-outs cannot show a rate "
        f"below {fmt(n.sla)}: its failure rate is {failure_text(best)}, "
        "the table's 95% interval)"
    )
    baseline: Paragraph = (
        (
            ", against the zeroth-moment baseline's ",
            Number("zeroth_utilization", zeroth.utilization),
        )
        if zeroth is not None and zeroth is not best
        else (" (the zeroth-moment baseline itself)",)
    )
    return (
        f"Best policy among those meeting the SLA: {best.policy}, utilization ",
        Number("best_utilization", best.utilization),
        f" [{fmt(best.ci_low)}, {fmt(best.ci_high)}]{caveat}",
        *baseline,
        "; the no-SLA upper bound is ",
        Number("upper_bound", n.upper_bound.utilization if n.upper_bound else float("nan")),
        ". ",
        *count,
    )


PAPER_DRIFT = (
    "“On the cluster admission problem” §4–5: the moment policies look ahead of “now” because a "
    "deployment's size changes after it is admitted; they gain over the zeroth-moment policy where "
    "the belief tells growing deployments from shrinking ones. App. B's Figures 6–8 show the "
    "fitted Gamma priors of the core-lifetime rate, the normalised scale-out rate and the "
    "scale-out size that set this drift; their values are not legible in our copy."
)


def gain_verdict(r: PolicyRow) -> str:
    """Whether the policy's paired gain interval lies above, below or around zero."""
    if r.gain_ci_low is None or r.gain_ci_high is None:
        return "no interval"
    if r.gain_ci_low > 0.0:
        return "gains" if r.sla_met else "gains, but misses the SLA"
    if r.gain_ci_high < 0.0:
        return "loses"
    return "no gain resolved"


def gain_cell(r: PolicyRow) -> str:
    """The gain and its paired interval in percent."""

    def pct(x: float | None) -> float | None:
        return None if x is None else 100.0 * x

    return fmt_ci(pct(r.gain_vs_zeroth), pct(r.gain_ci_low), pct(r.gain_ci_high), "%")


def _gain_rows(n: AdmissionNumbers) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (
            r.policy,
            gain_cell(r),
            gain_verdict(r),
            "–" if r.lookahead_rejections is None else f"{r.lookahead_rejections:,}",
            "–" if r.sla_met is None else ("yes" if r.sla_met else "NO"),
        )
        for r in n.table2
        if r.policy != "zeroth"
    )


def _drift_rows(drift: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (f"{int(size)} core(s)", *(fmt(float(x)) for x in ratios))
        for size, ratios in zip(drift["sizes"], drift["expected_ratio"], strict=True)
    )


def _drift_paragraph(drift: Mapping[str, Any], key: str) -> Paragraph:
    return (
        " What the fitted priors predict (computed by the stage from the params export): a "
        "deployment scales out ",
        Number(f"{key}scaleouts_per_core_lifetime", float(drift["scaleouts_per_core_lifetime"])),
        " times per core lifetime on average (E[r/λ]); ",
        Number(f"{key}growing_share", float(drift["growing_share"]), "%"),
        " of arriving deployments have r/λ > 1 and grow in expectation, the rest only shrink. "
        "For an arrival of one core the policies' belief predicts at most ",
        Number(f"{key}peak_ratio", float(drift["peak_ratio"])),
        " times its size, ",
        Number(f"{key}peak_hours", float(drift["peak_hours"]), "", "h"),
        " ahead; the table gives E[size] / size now at the end of each look-ahead horizon.",
    )


def _gain_text(n: AdmissionNumbers, key: str) -> tuple[Paragraph, list[HtmlTable]]:
    """Whether the first- and second-moment policies gain over the zeroth, and the drift that
    decides it; every number from ``policies.parquet`` and ``summary.json``'s ``drift``."""
    drift = n.summary.get("drift")
    first = next((r for r in n.table2 if r.policy == "first"), None)
    rows = _gain_rows(n)
    text: Paragraph = (
        "Gain over the zeroth-moment policy, utilization ratio − 1 with its 95% interval "
        "paired over the verification runs (run r of every policy sees the same arrivals): ",
        "; ".join(f"{r[0]}: {r[2]}" for r in rows) + "." if rows else "no moment policy ran.",
    )
    if first is not None and first.lookahead_rejections == 0:
        text += (
            " The first-moment policy's look-ahead rejected no verification arrival that fit "
            "under T·C now: it decided as the zeroth-moment policy at its T.",
        )
    tables = [
        HtmlTable(
            "Gain over the zeroth-moment policy (paired 95% interval) and look-ahead rejections "
            "(verification arrivals that fit now but a later look-ahead step rejected)",
            ("policy", "gain", "verdict", "look-ahead rejections", "SLA met"),
            rows,
        )
    ]
    if drift is not None:
        text += _drift_paragraph(drift, key)
        tables.append(
            HtmlTable(
                "Expected size / size now of an arriving deployment, as the policies' belief "
                "predicts it (priors updated with the initial size)",
                ("arriving with", *(f"{fmt(float(h))} h ahead" for h in drift["hours"])),
                _drift_rows(drift),
            )
        )
    return text, tables


def _lookahead_section(n: AdmissionNumbers) -> Section:
    text, tables = _gain_text(n, "")
    return Section(
        title="Does the look-ahead gain here?",
        this_run=text,
        paper=PAPER_DRIFT,
        tables=tuple(tables),
    )


#: the paper's-regime record ``bench/admission.py --regime`` writes inside the stage's folder
REGIME_FOLDER = "regime"


def _regime_section(n: AdmissionNumbers) -> Section:
    """Table 2 of the paper's-regime run (``bench/admission.py --regime``), from its own files."""
    text, tables = _gain_text(n, "regime_")
    setup: Paragraph = (
        "Recorded by bench/admission.py --regime (its own summary.json and tables in "
        f"results/{TRACE}/{STAGE}/{REGIME_FOLDER}): one cluster of C = ",
        *_cluster_shape(n, "regime_"),
        f" per threshold and for verification, {n.lookahead_steps} steps per look-ahead horizon. ",
    )
    return Section(
        title="In the paper's regime (bench/admission.py --regime)",
        this_run=setup + text,
        paper=PAPER_TABLE2,
        tables=(_table2(n), *tables),
    )


def _bisection_text(n: AdmissionNumbers) -> str:
    """What the tuning could resolve, from the tuning table and the recorded step count."""
    brackets = tuning_brackets(n.tuning)
    steps = n.summary.get("parameters", {}).get("tuning_iterations", "?")
    parts = "; ".join(f"{k} [{fmt(lo)}, {fmt(hi)}]" for k, (lo, hi) in brackets.items())
    return (
        f" With {steps} bisection steps per policy each tuned T is known only to within the "
        f"bracket between the last threshold that met the SLA and the first that did not ({parts}; "
        "– : no step on that side), so an ordering of policies finer than these brackets is "
        "not resolved by this run."
    )


def _figure1_section(ctx: PageContext, n: AdmissionNumbers) -> Section:
    xs = sorted({r.observations for r in n.figure1})
    drawn = len(xs) >= 2
    return Section(
        title="Value of prior observations (“On the cluster admission problem” Fig. 1)",
        this_run=(
            "Tuned first- and second-moment policies with the marginal heuristic at "
            f"{', '.join(str(k) for k in xs)} prior observations per deployment (",
            Number("figure1_points", float(len(n.figure1)), ".0f"),
            " tuned policies)"
            + (
                "."
                if drawn
                else "; a curve needs at least two values of --observations, so no figure: "
                "their utilizations are in the table above."
            ),
        ),
        paper=PAPER_FIG1,
        figures=tuple(_figure1(ctx, n)) if drawn else (),
    )


def admission_sections(ctx: PageContext) -> Sequence[Section]:
    """“On the cluster admission problem” Table 2, Fig. 1 and the tuning, from ``results/azure-2017/admission``."""
    stage_dir = ctx.results(STAGE)
    n = admission_numbers(stage_dir)
    if not n.table2:
        raise InputsMissing("policies.parquet has no policy without prior observations")
    zeroth = next((r for r in n.table2 if r.policy == "zeroth"), None)
    sections = [
        _setup_section(n),
        Section(
            title="Tuned policies (“On the cluster admission problem” Table 2)",
            this_run=_headline(n, zeroth),
            paper=PAPER_TABLE2,
            figures=tuple(_table2_figure(ctx, n)),
            tables=(_table2(n),),
        ),
    ]
    sections.append(_lookahead_section(n))
    regime = stage_dir / REGIME_FOLDER
    if (regime / "summary.json").is_file():
        sections.append(_regime_section(admission_numbers(regime)))
    if n.importance is not None:
        sections.append(_importance_section(n.importance))
    if n.figure1:
        sections.append(_figure1_section(ctx, n))
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
    sections.append(parameters_section(n.summary, AdmissionParams, "admission"))
    return sections


def _recorded(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """The stage's recorded options (``parameters``; summaries before the record: ``params``)."""
    block = summary.get("parameters", summary.get("params", {}))
    return block if isinstance(block, Mapping) else {}


#: this module's pages (their stage orders them among the others)
PAGES = (
    PageSpec(
        "azure-admission",
        "Cluster admission control",
        TRACE,
        "admission",
        (stage_results("admission", "summary.json").relative(TRACE),),
        "tracelab admission",
        admission_sections,
    ),
)
