"""The lifetime-aware placement page (the LAVA paper (“Lifetime-Aware VM Allocation”) Fig. 6, Fig. 2, Table 2; issue 17).

Reads only ``results/azure-2017/placement/`` (``summary.json`` and the stage's Parquet tables).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelab.reports.figures import new_axes
from tracelab.reports.frames import collect, floats, fmt_int, fmt_num, read_json, scan
from tracelab.reports.model import Figure, HtmlTable, InputsMissing, Number, PageContext, Section

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
_PAPER_TEXT = (
    "the LAVA paper (“Lifetime-Aware VM Allocation”) §6.1, Fig. 6: over 24 C2 pools (seven weeks of production traces), LAVA raises empty "
    "hosts by 6.5 pp over the production baseline, LAS by 6.1 pp and LA-Binary by 5.0 pp; with "
    "oracle lifetimes LAS reaches 9.5 pp against LA's 7.5 pp, because repredicting beats "
    "predicting once."
)


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
        raise InputsMissing("missing results/azure-2017/placement/summary.json")
    return folder


def _fig6(ctx: PageContext, summary: Mapping[str, Any], replays: pl.DataFrame) -> list[Figure]:
    """Bars: this run's mean improvement (dots: each pool) beside the paper's."""
    keys = [(k, label) for k, label in _BARS if k in summary["improvement_pp"]]
    paper = summary.get("paper_improvement_pp", {})
    with new_axes(
        ctx.out_dir,
        "placement_fig6",
        alt="Bar chart of the empty-host improvement over Best Fit per policy, this run beside the LAVA paper (“Lifetime-Aware VM Allocation”).",
        caption="Empty hosts, improvement over Best Fit in percentage points: this run (bars: mean "
        "over pools; dots: each pool) and the LAVA paper (“Lifetime-Aware VM Allocation”) Fig. 6 (hatched).",
    ) as (ax, made):
        x = np.arange(len(keys), dtype=np.float64)
        ours = [float(summary["improvement_pp"][k]) for k, _ in keys]
        ax.bar(x - 0.2, ours, width=0.4, label="this run")
        theirs = [float(paper.get(k, np.nan)) for k, _ in keys]
        ax.bar(
            x + 0.2,
            theirs,
            width=0.4,
            hatch="//",
            alpha=0.5,
            label="the LAVA paper (“Lifetime-Aware VM Allocation”)",
        )
        for i, (k, _) in enumerate(keys):
            policy, predictor = k.split("/")
            rows = replays.filter((pl.col("policy") == policy) & (pl.col("predictor") == predictor))
            pts = floats(rows, "improvement_pp")
            ax.plot(np.full(pts.size, x[i] - 0.2), pts, "k.", markersize=3)
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_xticks(x, [label for _, label in keys], rotation=20, fontsize=8)
        ax.set_ylabel("empty hosts vs Best Fit (pp)")
        ax.legend(fontsize=8)
    return made


def _series_figure(ctx: PageContext, series: pl.DataFrame) -> list[Figure]:
    pool = int(floats(series, "pool").max()) if series.height else 0
    one = series.filter(pl.col("pool") == pool)
    with new_axes(
        ctx.out_dir,
        "placement_empty_series",
        alt="Empty hosts over time in the largest pool, one line per policy.",
        caption=f"Empty hosts (% of pool {pool}) hour by hour, one line per policy and predictor.",
    ) as (ax, made):
        for (policy, predictor), part in one.group_by("policy", "predictor", maintain_order=True):
            ax.plot(
                floats(part, "hour"),
                floats(part, "empty_host_pct"),
                linewidth=0.8,
                label=f"{policy} ({predictor})",
            )
        ax.set_xlabel("hour of the trace")
        ax.set_ylabel("empty hosts (%)")
        ax.legend(fontsize=7, ncol=2)
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
        raise InputsMissing(f"missing results/azure-2017/placement/{table}.parquet")
    return collect(scan(path, columns))


def _improvement_table(summary: Mapping[str, Any], improvement: pl.DataFrame) -> HtmlTable:
    paper = summary.get("paper_improvement_pp", {})
    rows = tuple(
        (
            str(r["policy"]),
            str(r["predictor"]),
            fmt_num(float(r["empty_host_pct"])),
            fmt_num(float(r["improvement_pp_mean"])),
            f"[{fmt_num(float(r['improvement_pp_min']))}, {fmt_num(float(r['improvement_pp_max']))}]",
            fmt_num(float(r["stranded_cpu_pct"])),
            fmt_num(float(r["stranded_memory_pct"])),
            fmt_num(float(paper[f"{r['policy']}/{r['predictor']}"]))
            if f"{r['policy']}/{r['predictor']}" in paper
            else "–",
        )
        for r in improvement.iter_rows(named=True)
    )
    return HtmlTable(
        "Per policy and predictor, means over pools",
        (
            "policy",
            "predictor",
            "empty hosts (%)",
            "vs Best Fit (pp)",
            "pool range (pp)",
            "stranded CPU (%)",
            "stranded memory (%)",
            "the LAVA paper (“Lifetime-Aware VM Allocation”) (pp)",
        ),
        rows,
    )


def _setup_section(summary: Mapping[str, Any], pools: pl.DataFrame) -> Section:
    params = summary.get("parameters", {})
    return Section(
        title="Data, pools and parameters",
        this_run=(
            f"Source: {summary['source']} ",
            "(the ingested vmtable replayed, or a stream generated from the exported deployment "
            "model); ",
            Number("vms", float(summary["vms"]), ",.0f"),
            " VMs over ",
            Number("pools", float(len(summary["pool_hosts"])), ".0f"),
            " pools of identical hosts (",
            Number("hosts", float(sum(summary["pool_hosts"])), ",.0f"),
            " hosts in all), ",
            Number("replays", float(summary["replays"]), ".0f"),
            " replays; VMs that fit nowhere: ",
            Number("rejected_vms", float(summary["rejected_vms"]), ",.0f"),
            ".",
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
                        fmt_num(float(r["mean_load"])),
                    )
                    for r in pools.iter_rows(named=True)
                ),
            ),
            HtmlTable(
                "Parameters",
                ("option", "value"),
                tuple((k, str(v)) for k, v in sorted(params.items())),
            ),
        ),
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
            Number("lars_saved_pct", float(summary["lars_saved_pct"]), ".3g", "%"),
            " fewer), and with oracle lifetimes ",
            Number("lars_oracle_migrations", float(summary["lars_oracle_migrations"]), ",.0f"),
            " (",
            Number("lars_oracle_saved_pct", float(summary["lars_oracle_saved_pct"]), ".3g", "%"),
            " fewer).",
        ),
        paper="the LAVA paper (“Lifetime-Aware VM Allocation”) Table 2 (oracle lifetimes, batches of 3 migrations of 20 minutes): 4.32% "
        "and 4.55% fewer migrations on two one-month traces.",
    )


def placement_sections(ctx: PageContext) -> Sequence[Section]:
    """the LAVA paper (“Lifetime-Aware VM Allocation”) Fig. 6 beside this run, reprediction curve, empty hosts over time, LARS, setup."""
    folder = _folder(ctx)
    summary = read_json(folder / "summary.json")
    replays = _read(folder, "replays", ("pool", "policy", "predictor", "improvement_pp"))
    improvement = _read(
        folder,
        "improvement",
        ("policy", "predictor", "empty_host_pct", "improvement_pp_mean", "improvement_pp_min"),
    )
    series = _read(folder, "empty_hosts_series", ("pool", "policy", "predictor", "hour"))
    curve = _read(folder, "lifetime_curve", ("age_hours", "expected_remaining_hours"))
    pools = _read(folder, "pools", ("pool", "hosts", "vms", "deployments", "mean_load"))
    n = placement_numbers(summary)
    headline = _headline(n, summary.get("paper_improvement_pp", {}))
    return [
        Section(
            title="Empty hosts over Best Fit (the LAVA paper (“Lifetime-Aware VM Allocation”) Fig. 6)",
            this_run=tuple(headline),
            paper=_PAPER_TEXT,
            figures=tuple(_fig6(ctx, summary, replays) + _series_figure(ctx, series)),
            tables=(_improvement_table(summary, improvement),),
        ),
        Section(
            title="Reprediction: expected remaining lifetime grows with age (the LAVA paper (“Lifetime-Aware VM Allocation”) §3, Fig. 2)",
            this_run=(
                "Under the exported Gamma prior of the per-deployment lifetime rate a VM's lifetime "
                "is Lomax; at creation it is expected to live ",
                Number("remaining_at_0", float(curve["expected_remaining_hours"][0]), ".3g", "h"),
                ", after a week ",
                Number(
                    "remaining_at_168",
                    float(curve.filter(pl.col("age_hours") == 168.0)["expected_remaining_hours"][0])
                    if (curve["age_hours"] == 168.0).any()
                    else float("nan"),
                    ".3g",
                    "h",
                ),
                " more.",
            ),
            paper="the LAVA paper (“Lifetime-Aware VM Allocation”) Fig. 2: expected lifetime 0.2 days at scheduling, 4 more days after one "
            "day, 10 more days after seven.",
            figures=tuple(_curve_figure(ctx, curve)),
        ),
        _predictor_section(n),
        _lars_section(summary),
        _setup_section(summary, pools),
    ]
