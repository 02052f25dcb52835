"""Pages for the azure-2017 Gamma priors (seed 004, Appendix B, Figs. 6–8)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import gammainc

from tracelab.analysis.params import FittedParameter, read_stage_params
from tracelab.reports.figures import new_axes
from tracelab.reports.frames import collect, floats, fmt_int, fmt_num, scan
from tracelab.reports.model import Figure, HtmlTable, InputsMissing, Number, PageContext, Section

#: (record name, figure number, per-deployment value, what it is)
_PRIORS = (
    ("core_lifetime_rate_prior", "6", "core lifetime rate (1/hour)"),
    ("normalised_scaleout_rate_prior", "7", "normalised scale-out rate"),
    ("scaleout_size_prior", "8", "scale-out size parameter (cores)"),
)


def _records(ctx: PageContext) -> dict[str, FittedParameter]:
    folder = ctx.results("priors")
    if not (folder / "params.json").is_file():
        raise InputsMissing("missing results/azure-2017/priors/params.json")
    return {r.name: r for r in read_stage_params(folder)}


def priors_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 004 Figs. 6–8: each Gamma prior's CDF over the cumulative histogram of the MLEs."""
    records = _records(ctx)
    mles = collect(
        scan(
            ctx.results("priors") / "deployment_mles.parquet",
            ("lifetime_rate_per_hour", "scaleout_rate_per_hour", "scaleout_size_param"),
        )
    )
    alpha_rec = records.get("scaleout_alpha")
    alpha = alpha_rec.parameters["alpha"].value if alpha_rec else 0.0
    lam = floats(mles, "lifetime_rate_per_hour")
    samples = {
        "core_lifetime_rate_prior": lam,
        # the paper's normalisation: rate × (mean core lifetime)^alpha = rate × lambda^-alpha
        "normalised_scaleout_rate_prior": floats(mles, "scaleout_rate_per_hour")
        * np.power(lam, -alpha),
        "scaleout_size_prior": floats(mles, "scaleout_size_param"),
    }
    sections: list[Section] = []
    for name, fig_no, what in _PRIORS:
        rec = records.get(name)
        if rec is None:
            continue
        shape = rec.parameters["shape"].value
        rate = rec.parameters["rate"].value
        v = samples[name]
        v = v[np.isfinite(v) & (v > 0)]
        figs: list[Figure] = []
        if v.size:
            with new_axes(
                ctx.out_dir,
                f"prior_{name}",
                alt=f"Cumulative histogram of per-deployment {what} with the fitted Gamma prior's CDF.",
                caption=f"{what}: normalised cumulative histogram of the deployments' MLEs and the Gamma(shape {shape:.3g}, rate {rate:.3g}) CDF.",
            ) as (ax, made):
                hi = float(np.quantile(v, 0.99))
                ax.hist(
                    v[v <= hi],
                    bins=60,
                    cumulative=True,
                    density=True,
                    histtype="stepfilled",
                    alpha=0.4,
                    label="deployments (≤ 99th pct)",
                )
                grid = np.linspace(0.0, hi, 400)
                ax.plot(
                    grid,
                    gammainc(shape, rate * grid),
                    color="red",
                    label="Gamma prior",
                )
                ax.set_xlim(0.0, hi)
                ax.set_xlabel(what)
                ax.set_ylabel("CDF")
                ax.legend(fontsize=8)
            figs.extend(made)
        ci = rec.ci
        sections.append(
            Section(
                title=f"{what.capitalize()} prior (seed 004 Fig. {fig_no})",
                this_run=(
                    "Gamma shape ",
                    Number(f"{name}_shape", shape, ".4g"),
                    " and rate ",
                    Number(f"{name}_rate", rate, ".4g", rec.parameters["rate"].unit),
                    " from n = ",
                    Number(f"{name}_n", float(rec.n), ",.0f"),
                    " deployments; KS distance ",
                    Number(
                        f"{name}_ks",
                        float(rec.ks_distance if rec.ks_distance is not None else float("nan")),
                        ".3f",
                    ),
                    "; the prior's mean ",
                    Number(f"{name}_mean", shape / rate, ".4g"),
                    " against the deployments' mean ",
                    Number(
                        f"{name}_sample_mean", float(v.mean()) if v.size else float("nan"), ".4g"
                    ),
                    ".",
                ),
                paper=(
                    "Seed 004 fits Gamma priors by maximum likelihood to the per-deployment estimates "
                    "(arrivals inside the window only) and shows each prior's CDF over the normalised "
                    "cumulative histogram of the deployments' values; the fits follow the data closely."
                ),
                figures=tuple(figs),
                tables=(
                    HtmlTable(
                        "Fit",
                        ("parameter", "value", "unit", "95% CI"),
                        tuple(
                            (
                                p,
                                fmt_num(q.value),
                                q.unit,
                                f"[{fmt_num(ci[p].low)}, {fmt_num(ci[p].high)}]"
                                if p in ci
                                else "–",
                            )
                            for p, q in rec.parameters.items()
                        ),
                    ),
                ),
            )
        )
    if not sections:
        raise InputsMissing("priors/params.json has none of the Gamma prior records")
    others = [r for r in records.values() if r.name not in {n for n, _, _ in _PRIORS}]
    sections.append(
        Section(
            title="Other parameters of the model",
            this_run=(
                "Every record of the priors stage (",
                Number("records", float(len(records)), ".0f"),
                " in all); the Gamma priors are above.",
            ),
            paper="Seed 004 Table 1/3: arrival rate, scale-out exponent α, shutdown model.",
            tables=(
                HtmlTable(
                    "Records",
                    ("name", "distribution", "parameters", "n", "method"),
                    tuple(
                        (
                            r.name,
                            r.distribution,
                            ", ".join(
                                f"{k} = {fmt_num(q.value)} {q.unit}".rstrip()
                                for k, q in r.parameters.items()
                            ),
                            fmt_int(r.n),
                            r.method,
                        )
                        for r in others
                    ),
                ),
            ),
        )
    )
    return sections
