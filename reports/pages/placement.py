"""The lifetime-aware placement page (the LAVA paper (“Lifetime-Aware VM Allocation”) Fig. 6, Fig. 2, Table 2).

Reads only ``results/azure-2017/placement/`` (``summary.json`` and the stage's Parquet tables).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelab.analysis.common.datapaths import stage_results
from tracelab.analysis.common.intervals import Estimate
from tracelab.analysis.placement.model import TRACE
from tracelab.analysis.placement.options import PlacementParams
from tracelab.analysis.traces import azure2017
from tracelab.reports.figures import new_axes
from tracelab.reports.frames import collect, floats, fmt_int, read_json, scan
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
from tracelab.reports.numfmt import fmt
from tracelab.reports.run_parameters import parameters_section

STAGE = "placement"
#: (policy/predictor, label) in the order of the LAVA paper (“Lifetime-Aware VM Allocation”) Fig. 6
_BARS = (
    ("la-binary/oracle", "LA-Binary, oracle"),
    ("las/oracle", "LAS, oracle"),
    ("lava/oracle", "LAVA, oracle"),
    ("la-binary/model", "LA-Binary"),
    ("las/model", "LAS"),
    ("lava/model", "LAVA"),
    ("las/one-shot", "LAS, one-shot"),
    ("lava/one-shot", "LAVA, one-shot"),
)
_ORACLE = tuple((k, label) for k, label in _BARS if k.endswith("/oracle"))
_MODEL = tuple((k, label) for k, label in _BARS if not k.endswith("/oracle"))
_PAPER_TEXT = (
    "the LAVA paper (“Lifetime-Aware VM Allocation”) §6.1, Fig. 6: over 24 C2 pools (seven weeks "
    "of production traces), with oracle lifetimes LAS gains 9.5 pp of empty hosts and LA-Binary "
    "7.5 pp over the production baseline, because repredicting beats predicting once."
)
_PAPER_MODEL_TEXT = (
    "the LAVA paper §6.1, Fig. 6: with its production lifetime model LAVA gains 6.5 pp, LAS 6.1 pp "
    "and LA-Binary 5.0 pp over the production scheduler. Those gains rest on a model trained on "
    "the production fleet's features and on the production scheduler as baseline; neither is "
    "reproduced here, so they are not set beside this run's numbers."
)
#: the paper's pools (§6.1): 24, of hundreds to 10,000+ hosts
PAPER_POOLS = 24


def placement_numbers(summary: Mapping[str, Any]) -> dict[str, float]:
    """The page's numbers from ``summary.json``: empty %, improvement pp, LARS, sizes."""
    out: dict[str, float] = {
        "vms": float(summary["vms"]),
        "replays": float(summary["replays"]),
        "pools": float(len(summary["pool_hosts"])),
        "hosts": float(sum(summary["pool_hosts"])),
        "rejected_vms": float(summary["rejected_vms"]),
        "lars_baseline_migrations": float(summary["lars_baseline_migrations"]),
        "lars_model_migrations": float(summary["lars_model_migrations"]),
        "lars_oracle_migrations": float(summary["lars_oracle_migrations"]),
        "lars_saved_pct": float(summary["lars_saved_pct"]),
        "lars_oracle_saved_pct": float(summary["lars_oracle_saved_pct"]),
    }
    for key, value in summary["empty_host_pct"].items():
        out[f"empty_pct_{_slug(key)}"] = float(value)
    for key, value in summary["improvement_pp"].items():
        out[f"improvement_pp_{_slug(key)}"] = float(value)
    for key, value in summary.get("stranded_cpu_pct", {}).items():
        out[f"stranded_cpu_pct_{_slug(key)}"] = float(value)
    for key, value in summary.get("stranded_memory_pct", {}).items():
        out[f"stranded_memory_pct_{_slug(key)}"] = float(value)
    pred = summary.get("prediction") or {}
    for key in ("class_accuracy", "majority_class_share", "binary_accuracy", "class_vms"):
        if key in pred:
            out[key] = float(pred[key])
    for key in ("class_accuracy_ci", "binary_accuracy_ci"):
        if key in pred:
            out[f"{key}_low"], out[f"{key}_high"] = (float(v) for v in pred[key])
    return out


def _headline(n: Mapping[str, float], paper: Mapping[str, Any]) -> list[str | Number]:
    """Oracle gains beside the paper's oracle gains first, then the model's, then stranding."""
    out: list[str | Number] = ["Mean improvement in empty hosts over Best Fit: "]
    for key, label in _BARS:
        name = f"improvement_pp_{_slug(key)}"
        if name in n:
            out += [f"{label} ", Number(name, n[name], "+.2f", "pp")]
            if key in paper:
                out += [
                    " (paper ",
                    Number(f"paper_{_slug(key)}", float(paper[key]), "+.1f", "pp"),
                    ")",
                ]
            out.append("; ")
    out[-1] = ". "
    cpu = [(k, v) for k, v in n.items() if k.startswith("stranded_cpu_pct_")]
    if cpu:
        out.append("Stranded CPU (inflation, % of cores): ")
        for k, v in cpu:
            out += [
                f"{k.removeprefix('stranded_cpu_pct_').replace('_', ' ')} ",
                Number(k, v, ".2f", "%"),
                "; ",
            ]
        out[-1] = "."
    return out


def _predictor_section(n: Mapping[str, float]) -> Section:
    if "class_accuracy" not in n:
        return Section(
            title="Lifetime predictor",
            this_run=("This run recorded no predictor check.",),
            paper="the LAVA paper (“Lifetime-Aware VM Allocation”) §3, §6.4.",
        )
    return Section(
        title="Lifetime predictor: classes at creation against true lifetimes",
        this_run=(
            "The model (exported prior, scaled by the subscription's other deployments and the "
            "VMs of the same category and shape, updated with the deployment's own history; all "
            "read before the VM's creation) puts ",
            Number("class_accuracy", n["class_accuracy"] * 100, ".1f", "%"),
            " of ",
            Number("class_vms", n["class_vms"], ",.0f"),
            " VMs in their true LAVA class (95% CI ",
            Number("class_accuracy_ci_low", n["class_accuracy_ci_low"] * 100, ".1f", "%"),
            "–",
            Number("class_accuracy_ci_high", n["class_accuracy_ci_high"] * 100, ".1f", "%"),
            "; always guessing the commonest class scores ",
            Number("majority_class_share", n["majority_class_share"] * 100, ".1f", "%"),
            ") and ",
            Number("binary_accuracy", n["binary_accuracy"] * 100, ".1f", "%"),
            " on the right side of LA-Binary's 2 h cutoff (VMs alive at the end count only "
            "where their class is known).",
        ),
        paper="the LAVA paper (“Lifetime-Aware VM Allocation”) §3, §6.4: a GBDT on zone, VM "
        "family, shape and metadata plus uptime; 99% precision at 70% recall for short vs long "
        "(7-day cutoff), F1 0.8 without uptime.",
    )


def _slug(key: str) -> str:
    return key.replace("/", "_").replace("-", "_")


def _folder(ctx: PageContext) -> Path:
    folder = ctx.results(STAGE)
    if not (folder / "summary.json").is_file():
        raise InputsMissing(f"missing results/{TRACE}/{STAGE}/summary.json")
    return folder


def improvement_means(summary: Mapping[str, Any]) -> dict[str, Estimate]:
    """``policy/predictor`` -> mean improvement over Best Fit over pools with its t interval,
    as the stage stored it in ``summary.json``."""
    stored = summary.get("improvement_pp_interval")
    if not isinstance(stored, dict):
        raise InputsMissing(
            f"results/{TRACE}/{STAGE}/summary.json has no improvement_pp_interval (an older "
            "`tracelab place` wrote it)"
        )
    return {str(k): Estimate.from_dict(d) for k, d in stored.items()}


def _bars(
    ctx: PageContext,
    name: str,
    keys: Sequence[tuple[str, str]],
    means: Mapping[str, Estimate],
    paper: Mapping[str, float],
    caption: str,
) -> list[Figure]:
    """Bars of this run's mean improvement (95% t interval over pools) and, where given, the
    paper's beside them (hatched)."""
    keys = [(k, label) for k, label in keys if k in means]
    with new_axes(ctx.out_dir, name, alt=caption, caption=caption) as (ax, made):
        x = np.arange(len(keys), dtype=np.float64)
        width = 0.4 if paper else 0.6
        ours = [means[k] for k, _ in keys]
        err = np.array([[max(m.value - m.low, 0), max(m.high - m.value, 0)] for m in ours]).T
        ax.bar(
            x - (0.2 if paper else 0.0),
            [m.value for m in ours],
            width=width,
            yerr=np.nan_to_num(err),
            capsize=3,
            label="this run (vs Best Fit)",
        )
        if paper:
            ax.bar(
                x + 0.2,
                [paper.get(k, np.nan) for k, _ in keys],
                width=width,
                hatch="//",
                alpha=0.5,
                label="the LAVA paper (vs its production baseline)",
            )
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_xticks(x, [label for _, label in keys], fontsize=8)
        ax.set_ylabel("empty hosts gained (pp)")
        ax.legend(fontsize=8)
    return made


def _gains(
    keys: Sequence[tuple[str, str]], means: Mapping[str, Estimate], n: Mapping[str, float]
) -> list[str | Number]:
    """``label x [a, b]; …`` for the keys this run has (Numbers keyed improvement_pp_<key>)."""
    out: list[str | Number] = []
    for key, label in keys:
        name = f"improvement_pp_{_slug(key)}"
        if name in n and key in means:
            m = means[key]
            out += [
                f"{label} ",
                Number(name, n[name], "", "pp"),
                f" [{fmt(m.low)}, {fmt(m.high)}]",
                "; ",
            ]
    return out[:-1]


def _oracle_section(
    ctx: PageContext,
    summary: Mapping[str, Any],
    means: Mapping[str, Estimate],
    n: Mapping[str, float],
) -> Section:
    paper = {
        k: v for k, v in summary.get("paper_improvement_pp", {}).items() if k.endswith("/oracle")
    }
    gains = _gains(_ORACLE, means, n)
    text: Paragraph = (
        (
            "With the true lifetimes (oracle), the one comparison the paper's numbers allow, "
            "empty hosts gained over Best Fit (mean over pools [95% t interval]): ",
            *gains,
            ". The paper's baseline is its production scheduler, ours Best Fit.",
        )
        if gains
        else (
            "This run has no oracle replays (--predictors without oracle): nothing here is "
            "comparable with the paper's Fig. 6.",
        )
    )
    return Section(
        title="Empty hosts with oracle lifetimes (the LAVA paper (“Lifetime-Aware VM Allocation”) Fig. 6)",
        this_run=text,
        paper=_PAPER_TEXT,
        figures=tuple(
            _bars(
                ctx,
                "placement_fig6",
                _ORACLE,
                means,
                paper,
                "Empty hosts gained with oracle lifetimes (pp): this run over Best Fit (mean "
                "over pools, 95% t interval) and the LAVA paper over its production baseline "
                "(hatched; none published for LAVA).",
            )
        )
        if gains
        else (),
    )


def _model_section(
    ctx: PageContext,
    means: Mapping[str, Estimate],
    n: Mapping[str, float],
    improvement: pl.DataFrame,
    summary: Mapping[str, Any],
) -> Section:
    shown = [(k, label) for k, label in _MODEL if k in means]
    return Section(
        title="Empty hosts with the fitted lifetime model",
        this_run=(
            "With the fitted lifetime model (repredicted with age, or once at creation), empty "
            "hosts gained over Best Fit (mean over pools [95% t interval]): ",
            *_gains(shown, means, n),
            ".",
        ),
        paper=_PAPER_MODEL_TEXT,
        figures=tuple(
            _bars(
                ctx,
                "placement_model",
                shown,
                means,
                {},
                "Empty hosts gained over Best Fit with the fitted model (pp): mean over pools, "
                "95% t interval; no paper bars (its model and baseline are production ones).",
            )
        ),
        tables=(_improvement_table(summary, improvement),),
    )


def _series_figure(ctx: PageContext, series: pl.DataFrame) -> list[Figure]:
    """One panel per predictor, each with Best Fit and the (at most three) policies using it."""
    pool = int(floats(series, "pool").max()) if series.height else 0
    one = series.filter(pl.col("pool") == pool)
    predictors = [p for p in dict.fromkeys(one["predictor"].to_list()) if p != "none"]
    policies = list(dict.fromkeys(one["policy"].to_list()))
    with new_axes(
        ctx.out_dir,
        "placement_empty_series",
        alt="Empty hosts over time in the largest pool, one panel per predictor.",
        caption=f"Empty hosts (% of pool {pool}) hour by hour, one panel per predictor; Best Fit "
        "in every panel (grey).",
        ncols=max(len(predictors), 1),
        size=(3.6 * max(len(predictors), 1) + 0.4, 3.4),
        margins={"left": 0.08, "right": 0.98, "bottom": 0.15, "top": 0.9},
    ) as (axes, made):
        for ax, predictor in zip(axes[0], predictors or ["none"], strict=False):
            for policy in policies:
                wanted = "none" if policy == "best-fit" else predictor
                part = one.filter((pl.col("policy") == policy) & (pl.col("predictor") == wanted))
                if part.height:
                    ax.plot(
                        floats(part, "hour"),
                        floats(part, "empty_host_pct"),
                        linewidth=0.8,
                        color="grey" if policy == "best-fit" else f"C{policies.index(policy)}",
                        label=policy,
                    )
            ax.set_title(f"{predictor} lifetimes", fontsize=9)
            ax.set_xlabel("hour of the trace", fontsize=8)
            ax.tick_params(labelsize=8)
            ax.legend(fontsize=8)
        axes[0][0].set_ylabel("empty hosts (%)", fontsize=8)
    return made


def _curve_figure(ctx: PageContext, curve: pl.DataFrame) -> list[Figure]:
    with new_axes(
        ctx.out_dir,
        "placement_reprediction",
        alt="Expected remaining lifetime against age under the fitted Lomax lifetime.",
        caption="E[T_r | T_u]: expected remaining lifetime at age T_u under the exported prior "
        "(restricted to the horizon, and unrestricted where finite).",
    ) as (ax, made):
        age = floats(curve, "age_hours")
        ax.plot(age, floats(curve, "expected_remaining_hours"), marker="o", label="restricted")
        unres = floats(curve, "expected_remaining_unrestricted_hours")
        if np.isfinite(unres).any():
            ax.plot(age, unres, linestyle="--", label="unrestricted")
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlabel("age T_u (hours)")
        ax.set_ylabel("E[T_r | T_u] (hours)")
        ax.legend(fontsize=8)
    return made


def _read(folder: Path, table: str, columns: tuple[str, ...]) -> pl.DataFrame:
    path = folder / f"{table}.parquet"
    if not path.is_file():
        raise InputsMissing(f"missing results/{TRACE}/{STAGE}/{table}.parquet")
    return collect(scan(path, columns))


def stranding_is_constant(replays: pl.DataFrame) -> bool:
    """True when every replay strands the same CPU and memory shares (nothing to compare)."""
    cols = ("stranded_cpu_pct", "stranded_memory_pct")
    return replays.height > 0 and all(replays[c].n_unique() == 1 for c in cols)


def stranding_statement(summary: Mapping[str, Any], replays: pl.DataFrame) -> str:
    """Why stranding cannot vary here, from the recorded host shape and the constant result."""
    params = summary.get("parameters", {})
    cores, memory = params.get("host_cores"), params.get("host_memory_gb")
    cpu, mem = float(replays["stranded_cpu_pct"][0]), float(replays["stranded_memory_pct"][0])
    text = (
        f"Stranding cannot differ between policies in this run: all {replays.height} replays "
        f"strand {fmt(cpu)}% of CPU and {fmt(mem)}% of memory."
    )
    if cores and memory and cpu == 0.0:
        host = float(memory) / float(cores)
        text += (
            f" Hosts have {fmt(host)} GB per core (--host-memory-gb {show_number(memory)} / "
            f"--host-cores {show_number(cores)}); a host filled by inflation runs out of cores "
            f"first and keeps {fmt(mem)}% of its memory, which is what VMs of one shape, "
            f"{fmt(host * (1 - mem / 100))} GB per core, leave whatever the placement: the VM "
            "mix has no second shape that could use the memory."
        )
    return text


def show_number(value: Any) -> str:
    return format(float(value), ",.10g")


def _improvement_table(summary: Mapping[str, Any], improvement: pl.DataFrame) -> HtmlTable:
    stranding = improvement["stranded_cpu_pct"].n_unique() > 1 or (
        improvement["stranded_memory_pct"].n_unique() > 1
    )
    rows = tuple(
        (
            str(r["policy"]),
            str(r["predictor"]),
            fmt(float(r["empty_host_pct"])),
            fmt(float(r["improvement_pp_mean"])),
            f"[{fmt(float(r['improvement_pp_min']))}, {fmt(float(r['improvement_pp_max']))}]",
            *(
                (fmt(float(r["stranded_cpu_pct"])), fmt(float(r["stranded_memory_pct"])))
                if stranding
                else ()
            ),
        )
        for r in improvement.iter_rows(named=True)
    )
    return HtmlTable(
        "Per policy and predictor, means over pools (this run; pool range: lowest and highest "
        "pool)",
        (
            "policy",
            "predictor",
            "empty hosts (%)",
            "vs Best Fit (pp)",
            "pool range (pp)",
            *(("stranded CPU (%)", "stranded memory (%)") if stranding else ()),
        ),
        rows,
    )


def _setup_section(
    summary: Mapping[str, Any], pools: pl.DataFrame, replays: pl.DataFrame
) -> Section:
    hosts = list(summary["pool_hosts"])
    constant = stranding_is_constant(replays)
    return Section(
        title="Data and pools",
        this_run=(
            f"Source: {summary['source']} ",
            "(the ingested vmtable replayed, or a stream generated from the exported deployment "
            "model); ",
            Number("vms", float(summary["vms"]), ",.0f"),
            " VMs over ",
            Number("pools", float(len(hosts)), ".0f"),
            f" pools of {min(hosts):,}–{max(hosts):,} identical hosts (",
            Number("hosts", float(sum(hosts)), ",.0f"),
            f" hosts in all; the paper: {PAPER_POOLS} pools of hundreds to 10,000+ hosts), ",
            Number("replays", float(summary["replays"]), ".0f"),
            " replays; VMs that fit nowhere: ",
            Number("rejected_vms", float(summary["rejected_vms"]), ",.0f"),
            ". " + (stranding_statement(summary, replays) if constant else ""),
        ),
        paper="the LAVA paper (“Lifetime-Aware VM Allocation”) §5.1 replays production VM start/exit traces of each pool on a simulated "
        "scheduler; its pools hold 100s to 10,000+ hosts.",
        tables=(
            HtmlTable(
                "Pools",
                ("pool", "hosts", "VMs", "deployments", "mean load"),
                tuple(
                    (
                        str(r["pool"]),
                        fmt_int(int(r["hosts"])),
                        fmt_int(int(r["vms"])),
                        fmt_int(int(r["deployments"])),
                        fmt(float(r["mean_load"])),
                    )
                    for r in pools.iter_rows(named=True)
                ),
            ),
        ),
    )


def _saved_interval(summary: Mapping[str, Any], key: str) -> tuple[str | Number, ...]:
    """`` [low, high]`` of a saved share from the summary's interval (nothing when absent)."""
    ci = summary.get(f"{key}_ci")
    if not ci:
        return ()
    return (
        " [",
        Number(f"{key}_ci_low", float(ci[0]), "", "%"),
        ", ",
        Number(f"{key}_ci_high", float(ci[1]), "", "%"),
        "]",
    )


def _lars_section(summary: Mapping[str, Any]) -> Section:
    return Section(
        title="LARS: migration order for defragmentation (the LAVA paper (“Lifetime-Aware VM Allocation”) §4.4, Table 2)",
        this_run=(
            "On the hosts a defragmenter would drain from the Best Fit replays, migrating host by "
            "host in a lifetime-blind order takes ",
            Number("lars_baseline_migrations", float(summary["lars_baseline_migrations"]), ",.0f"),
            " live migrations; LARS (longest repredicted VM first) takes ",
            Number("lars_model_migrations", float(summary["lars_model_migrations"]), ",.0f"),
            " (",
            Number("lars_saved_pct", float(summary["lars_saved_pct"]), "", "%"),
            *_saved_interval(summary, "lars_saved_pct"),
            " fewer), and with oracle lifetimes ",
            Number("lars_oracle_migrations", float(summary["lars_oracle_migrations"]), ",.0f"),
            " (",
            Number("lars_oracle_saved_pct", float(summary["lars_oracle_saved_pct"]), "", "%"),
            *_saved_interval(summary, "lars_oracle_saved_pct"),
            " fewer)."
            + (
                f" Intervals: {summary['lars_interval_method']}, over "
                f"{int(summary.get('lars_sets', 0)):,} sets."
                if "lars_interval_method" in summary
                else " (No interval: this run's summary predates them; re-run `tracelab placement`.)"
            ),
        ),
        paper="the LAVA paper (“Lifetime-Aware VM Allocation”) Table 2 (oracle lifetimes, batches of 3 migrations of 20 minutes): 4.32% "
        "and 4.55% fewer migrations on two one-month traces.",
    )


def placement_sections(ctx: PageContext) -> Sequence[Section]:
    """Oracle gains beside the paper's first, then the model's, reprediction, LARS, setup."""
    folder = _folder(ctx)
    summary = read_json(folder / "summary.json")
    replays = _read(
        folder,
        "replays",
        (
            "pool",
            "policy",
            "predictor",
            "improvement_pp",
            "stranded_cpu_pct",
            "stranded_memory_pct",
        ),
    )
    improvement = _read(
        folder,
        "improvement",
        ("policy", "predictor", "empty_host_pct", "improvement_pp_mean", "improvement_pp_min"),
    )
    series = _read(folder, "empty_hosts_series", ("pool", "policy", "predictor", "hour"))
    curve = _read(folder, "lifetime_curve", ("age_hours", "expected_remaining_hours"))
    pools = _read(folder, "pools", ("pool", "hosts", "vms", "deployments", "mean_load"))
    n = placement_numbers(summary)
    means = improvement_means(summary)
    series_section = Section(
        title="Empty hosts over time",
        this_run=("Empty hosts hour by hour in the largest pool, per predictor.",),
        paper="",
        figures=tuple(_series_figure(ctx, series)),
    )
    return [
        _oracle_section(ctx, summary, means, n),
        _model_section(ctx, means, n, improvement, summary),
        _predictor_section(n),
        series_section,
        _curve_section(ctx, curve),
        _lars_section(summary),
        _setup_section(summary, pools, replays),
        parameters_section(summary, PlacementParams, "placement"),
    ]


def _curve_section(ctx: PageContext, curve: pl.DataFrame) -> Section:
    at_week = curve.filter(pl.col("age_hours") == 168.0)["expected_remaining_hours"]
    return Section(
        title="Reprediction: expected remaining lifetime grows with age (the LAVA paper (“Lifetime-Aware VM Allocation”) §3, Fig. 2)",
        this_run=(
            "Under the exported Gamma prior of the per-deployment lifetime rate a VM's lifetime "
            "is Lomax; at creation it is expected to live ",
            Number("remaining_at_0", float(curve["expected_remaining_hours"][0]), "", "h"),
            ", after a week ",
            Number(
                "remaining_at_168", float(at_week[0]) if at_week.len() else float("nan"), "", "h"
            ),
            " more.",
        ),
        paper="the LAVA paper (“Lifetime-Aware VM Allocation”) Fig. 2: expected lifetime 0.2 days at scheduling, 4 more days after one "
        "day, 10 more days after seven.",
        figures=tuple(_curve_figure(ctx, curve)),
    )


#: this module's pages (their stage orders them among the others)
PAGES = (
    PageSpec(
        "azure-placement",
        "Lifetime-aware VM placement",
        azure2017.ID,
        "placement",
        (stage_results("placement", "summary.json").relative(azure2017.ID),),
        "tracelab placement",
        placement_sections,
    ),
)
