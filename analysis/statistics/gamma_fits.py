"""Stage ``gamma_fits``: Gamma priors from the Google trace for the packing stages (docs/methods.md §2.7).

Maximum-likelihood Gamma(shape, rate) with the location fixed at 0 (``scipy.stats.gamma.fit(x,
floc=0)``) of: the per-task inst mean and inst std of long tasks (cores, normalised to the largest
machine) and the execution time of finished tasks (seconds). Each fit reports n, the
log-likelihood, the KS distance to the fitted CDF and a seeded percentile-bootstrap 95% CI of shape
and rate. The Gamma has support x > 0: zeros (a constant task has std 0; an execution can last
0 s) cannot enter the likelihood and are dropped, counted in ``n_dropped``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import stats

from tracelab.analysis.common.fitted_params import FittedParameter, Interval, Quantity
from tracelab.analysis.common.stage_outputs import HEADLINE, headline

# re-exported: the priors of the other traces bootstrap as often by default
from tracelab.analysis.statistics.options import DEFAULT_BOOTSTRAP as DEFAULT_BOOTSTRAP

GAMMA_STAGE = "gamma_fits"
METHOD = "maximum likelihood, scipy.stats.gamma.fit with floc=0; percentile bootstrap CI"

#: task_events event type of a normal end (docs/methods.md §0.1); only finished incarnations have a
#: complete execution time
FINISH_EVENT_TYPE = 4

FloatArray = npt.NDArray[np.float64]


def gamma_cdf(shape: float, rate: float, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The CDF of Gamma(shape, rate) with location 0 at ``x`` (what the pages draw beside the
    data; they do not compute distributions themselves)."""
    return np.asarray(stats.gamma.cdf(np.asarray(x, dtype=np.float64), shape, scale=1.0 / rate))


@dataclass(frozen=True)
class GammaFit:
    """Gamma(shape, rate) fitted to one positive sample; ``unit`` is the sample's unit."""

    name: str
    unit: str
    n: int
    n_dropped: int
    shape: float
    rate: float
    log_likelihood: float
    ks_distance: float
    shape_ci: tuple[float, float]
    rate_ci: tuple[float, float]
    n_bootstrap: int
    seed: int
    #: percentile-bootstrap 95% interval of the mean shape / rate (each replicate's ratio: shape
    #: and rate are strongly correlated, so the ratio of their intervals' ends would be too wide)
    mean_ci: tuple[float, float] = (float("nan"), float("nan"))

    def to_parameter(self, trace: str, stage: str = GAMMA_STAGE) -> FittedParameter:
        """The record the params export carries (rate in 1/``unit``)."""
        return FittedParameter(
            name=self.name,
            distribution="gamma",
            parameters={
                "shape": Quantity(self.shape, ""),
                "rate": Quantity(self.rate, f"1/{self.unit}"),
            },
            method=METHOD,
            n=self.n,
            stage=stage,
            trace=trace,
            log_likelihood=self.log_likelihood,
            ks_distance=self.ks_distance,
            ci={
                "shape": Interval(*self.shape_ci),
                "rate": Interval(*self.rate_ci),
                **({"mean": Interval(*self.mean_ci)} if np.all(np.isfinite(self.mean_ci)) else {}),
            },
            values={
                "n_dropped_nonpositive": self.n_dropped,
                "n_bootstrap": self.n_bootstrap,
                "seed": self.seed,
                "mean": self.shape / self.rate if self.rate > 0 else None,
            },
            notes=f"sample unit: {self.unit}; values <= 0 dropped before fitting",
        )


def _mle(x: FloatArray) -> tuple[float, float]:
    shape, _, scale = stats.gamma.fit(x, floc=0)
    return float(shape), float(1.0 / scale)


def gamma_fit(
    name: str,
    sample: npt.ArrayLike,
    *,
    unit: str,
    seed: int = 0,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
) -> GammaFit:
    """MLE Gamma fit (location 0) with log-likelihood, KS distance and bootstrap 95% CIs."""
    x_all = np.asarray(sample, dtype=np.float64)
    x_all = x_all[np.isfinite(x_all)]
    # sorted: the likelihood's sums and the bootstrap's draws (by position) then depend on the
    # values only, not on the order a table was read in, so two runs give the same bits
    x = np.sort(x_all[x_all > 0])
    if x.size < 2 or np.ptp(x) == 0:
        raise ValueError(f"{name}: a Gamma fit needs at least 2 distinct positive values")
    shape, rate = _mle(x)
    fitted = stats.gamma(shape, scale=1.0 / rate)
    rng = np.random.default_rng(seed)
    boot = np.empty((n_bootstrap, 2))
    for i in range(n_bootstrap):
        resample = x[rng.integers(0, x.size, x.size)]
        boot[i] = _mle(resample) if np.ptp(resample) > 0 else (np.nan, np.nan)
    if n_bootstrap > 0:
        boot = np.column_stack([boot, boot[:, 0] / boot[:, 1]])
        lo, hi = np.nanpercentile(boot, [2.5, 97.5], axis=0)
    else:
        lo = hi = np.array([np.nan, np.nan, np.nan])
    return GammaFit(
        name=name,
        unit=unit,
        n=int(x.size),
        n_dropped=int(x_all.size - x.size),
        shape=shape,
        rate=rate,
        log_likelihood=float(np.sum(fitted.logpdf(x))),
        ks_distance=float(stats.kstest(x, fitted.cdf).statistic),
        shape_ci=(float(lo[0]), float(hi[0])),
        rate_ci=(float(lo[1]), float(hi[1])),
        n_bootstrap=n_bootstrap,
        seed=seed,
        mean_ci=(float(lo[2]), float(hi[2])),
    )


@dataclass(frozen=True)
class GoogleGammaFits:
    """The stage's fits (inst mean, inst std, execution time) and the samples it could not fit."""

    fits: tuple[GammaFit, ...]
    #: (sample name, reason) of each sample with too few distinct positive values
    skipped: tuple[tuple[str, str], ...]
    seed: int
    n_bootstrap: int
    n_long_tasks: int
    n_finished_incarnations: int


def fit_gamma_samples(
    samples: Sequence[tuple[str, npt.ArrayLike, str]], *, seed: int, n_bootstrap: int
) -> tuple[tuple[GammaFit, ...], tuple[tuple[str, str], ...]]:
    """:func:`gamma_fit` of each ``(name, sample, unit)``, fit i bootstrapping with seed
    ``seed + i``; a sample that cannot be fitted is returned as ``(name, reason)`` instead of
    failing the stage (every trace's priors: google-2011, alibaba-2018, google-2019)."""
    fits: list[GammaFit] = []
    skipped: list[tuple[str, str]] = []
    for i, (name, sample, unit) in enumerate(samples):
        try:
            fits.append(gamma_fit(name, sample, unit=unit, seed=seed + i, n_bootstrap=n_bootstrap))
        except ValueError as exc:
            skipped.append((name, str(exc)))
    return tuple(fits), tuple(skipped)


def finished_execution_times(
    task_times: pl.LazyFrame, finish_event_type: int = FINISH_EVENT_TYPE
) -> FloatArray:
    """``execution_time_s`` of the finished incarnations in ``fct_task_times`` (seconds): the
    trace's own FINISH code (google-2019's is 6)."""
    frame = (
        task_times.filter(pl.col("terminal_event_type") == finish_event_type)
        .select("execution_time_s")
        .collect()
    )
    return np.asarray(frame["execution_time_s"].to_numpy(), dtype=np.float64)


#: the execution-time record, the one the page leads with
EXECUTION_FIT = "google_task_execution_time"


def google_gamma_fits(
    inst_mean: npt.ArrayLike,
    inst_std: npt.ArrayLike,
    execution_time_s: npt.ArrayLike,
    *,
    seed: int,
    n_bootstrap: int,
) -> GoogleGammaFits:
    """Gamma fits of the long tasks' inst mean and std (cores) and finished execution times (s).

    Fit i (in that order) bootstraps with seed ``seed + i``; a sample that cannot be fitted is
    listed in ``skipped`` with the reason instead of failing the stage.
    """
    mean = np.asarray(inst_mean, dtype=np.float64)
    execution = np.asarray(execution_time_s, dtype=np.float64)
    samples = (
        ("google_task_inst_mean", mean, "cores"),
        ("google_task_inst_std", np.asarray(inst_std, dtype=np.float64), "cores"),
        (EXECUTION_FIT, execution, "s"),
    )
    fits, skipped = fit_gamma_samples(samples, seed=seed, n_bootstrap=n_bootstrap)
    return GoogleGammaFits(
        fits=fits,
        skipped=skipped,
        seed=seed,
        n_bootstrap=n_bootstrap,
        n_long_tasks=int(mean.size),
        n_finished_incarnations=int(execution.size),
    )


def gamma_fits_table(fits: tuple[GammaFit, ...]) -> pl.DataFrame:
    """One row per fit: every :class:`GammaFit` field, the CIs as ``*_low`` / ``*_high`` columns."""
    return pl.DataFrame(
        [
            {k: v for k, v in vars(f).items() if k not in ("shape_ci", "rate_ci")}
            | {
                "shape_low": f.shape_ci[0],
                "shape_high": f.shape_ci[1],
                "rate_low": f.rate_ci[0],
                "rate_high": f.rate_ci[1],
            }
            for f in fits
        ]
    )


def gamma_fits_summary(result: GoogleGammaFits) -> dict[str, Any]:
    """The stage's ``summary.json``: run parameters, sample sizes, shape/rate/n per fit, skips."""
    return {
        "parameters": {"seed": result.seed, "n_bootstrap": result.n_bootstrap, "location": 0.0},
        "inputs": {
            "long_tasks": result.n_long_tasks,
            "finished_incarnations": result.n_finished_incarnations,
        },
        "fits": {f.name: {"shape": f.shape, "rate": f.rate, "n": f.n} for f in result.fits},
        "skipped": dict(result.skipped),
        HEADLINE: execution_headline(
            EXECUTION_FIT,
            next((f.n for f in result.fits if f.name == EXECUTION_FIT), 0),
            "FINISHed incarnations",
        ),
    }


def execution_headline(record: str, n: int, what: str) -> dict[str, str]:
    """The execution-time record's shape, which a priors page leads with, and its sample."""
    return headline(
        f"{record}_shape", f"MLE with location 0 over the execution times of {n:,} {what}"
    )


def gamma_fits_tables(result: GoogleGammaFits) -> dict[str, pl.DataFrame]:
    """The stage's Parquet tables by file stem: ``fits``."""
    return {"fits": gamma_fits_table(result.fits)}
