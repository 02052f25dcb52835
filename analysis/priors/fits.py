"""Per-deployment MLEs and population Gamma priors from the Azure vmtable (Cluster Admission App. B, docs/methods.md §2.6).

Input is the ``fct_azure_deployments`` table (one row per deployment with the sufficient
statistics of every per-deployment likelihood). Units: hours throughout.

Per deployment (only deployments that arrived inside the window, ``arrived_in_window``):

* core-lifetime rate ``lambda``: exponential MLE with right-censoring. A core that died after
  ``t`` hours contributes the density ``lambda exp(-lambda t)``, a censored core (alive at the end)
  the survival ``exp(-lambda t)``; the MLE is ``core_deaths / core_exposure_hours``. Cores of one
  VM share the VM's lifetime. Cores ended by a detected shutdown are censored by default
  (``shutdown_cores="censored"``: they did not die of their own lifetime, and the shutdown has its
  own rate) or deaths (``"paper"``: Cluster Admission App. B counts every core that became inactive). A
  deployment without a core death has no MLE and is left out of the lifetime fit, as App. B.1
  does ("for each deployment for which at least one core became inactive"), not substituted.
* scale-out rate ``r``: Poisson MLE ``n_scaleouts / observed_hours``.
* scale-out size parameter ``s`` (a scale-out adds ``1 + Poisson(s)`` cores):
  ``scaleout_extra_cores / n_scaleouts``; undefined without a scale-out (left out of the size fit).

Zero-event substitutes (App. B.1): a deployment that never scaled out gets ``-ln(p_rate) / T``
(seeing no scale-out in ``T`` hours then has probability ``p_rate``), one whose scale-outs never
added an extra core ``-ln(p_size) / N``. ``p_rate`` and ``p_size`` are calibrated as the paper does,
by minimising the discrete Cramér–von Mises distance between the data's deployment sizes (cores)
and those of deployments drawn from the fitted model (:mod:`analysis.priors_paper`), on a grid,
once on all deployments; a user-given ``zero_event_probability`` fixes both instead.

Population, two ways (records of stage ``priors``):

1. ``*_prior`` — the seed's two-stage method (App. B.2): Gamma(shape, rate) by maximum likelihood
   with the location fixed at 0 (``scipy.stats.gamma.fit(..., floc=0)``) on the per-deployment
   MLEs of ``lambda``, of the normalised scale-out rate ``r * (1/lambda)**alpha`` and of ``s``.
   ``alpha`` minimises the paper's criterion, the plain mean absolute deviation of the normalised
   rates from their mean, with lifetimes in hours: the criterion depends on the unit (it can run
   to the search bound, and the record says so). Deployment shutdown (>= 3 VMs ending together):
   exponential in the age measured in mean core lifetimes (``age * lambda``) over deployments with
   a lifetime MLE, other deployments censored at their age. n, log-likelihood, KS distance and
   seeded bootstrap 95% percentile CIs (deployments resampled with replacement, every step but the
   p calibration refitted). Known weakness, measured on generated traces: a deployment with one or
   two VMs has an MLE like ``1/t`` (infinite mean), so the fitted lifetime prior is too dispersed.
2. ``*_prior_marginal`` — the hierarchical model fitted directly (:func:`joint_marginal_fit`):
   per-deployment parameters are integrated out of the likelihood of the counts (the Gamma is
   conjugate), so small deployments and zero counts need no MLE and no substitute, and censored
   cores enter only through their exposure. Lifetime prior, normalised scale-out prior, alpha and
   the shutdown rate are fitted jointly because ``lambda`` appears in the scale-out term; the size
   prior alone. Wald CIs from the observed information (bootstrap for the size prior). On
   generated traces it recovers every prior within its standard errors
   (``tests/analysis/priors/test_priors_recovery.py``); consumers should prefer these records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import optimize, special, stats

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.fitted_params import FittedParameter, Interval, Quantity
from tracelab.analysis.common.stage_outputs import HEADLINE, headline
from tracelab.analysis.priors.paper import (
    ALPHA_BOUNDS,
    ALPHA_TIME_UNIT,
    CALIBRATION_REPLICATES,
    Calibration,
    SizeData,
    SizeModel,
    calibrate,
    calibration_uniforms,
    discrete_cvm_distance,
    simulated_scaleouts,
    simulated_sizes,
    simulated_sizes_from,
)
from tracelab.analysis.priors.paper import alpha_by_min_mad_paper as alpha_by_min_mad
from tracelab.analysis.traces import azure2017

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

STAGE = "priors"
TRACE = azure2017.ID

#: columns of fct_azure_deployments the fits read
DEPLOYMENT_COLUMNS: tuple[str, ...] = (
    "deploymentid",
    "arrived_in_window",
    "n_cores",
    "n_scaleouts",
    "scaleout_extra_cores",
    "observed_hours",
    "core_deaths",
    "core_exposure_hours",
    "lifetime_hours",
    "shut_down",
    "n_vms",
    "vm_deaths",
    "vm_exposure_hours",
    "arrival_cores",
    "cores_ended",
    "n_vms_ending_last",
)

#: how cores ended by a deployment shutdown enter the core-lifetime likelihood (PriorsOptions)
SHUTDOWN_CORES = ("censored", "paper")


def _ratio(num: FloatArray, den: FloatArray) -> FloatArray:
    out: FloatArray = np.asarray(num, dtype=np.float64) / np.asarray(den, dtype=np.float64)
    return out


def lifetime_rate_mle(core_deaths: FloatArray, core_exposure_hours: FloatArray) -> FloatArray:
    """Censored exponential MLE per deployment, 1/hour: deaths over total core-hours."""
    return _ratio(core_deaths, core_exposure_hours)


def scaleout_rate_mle(n_scaleouts: FloatArray, observed_hours: FloatArray) -> FloatArray:
    """Poisson MLE of the scale-out rate per deployment, 1/hour."""
    return _ratio(n_scaleouts, observed_hours)


def scaleout_size_mle(scaleout_extra_cores: FloatArray, n_scaleouts: FloatArray) -> FloatArray:
    """MLE of ``s`` in ``1 + Poisson(s)`` cores per scale-out; NaN without a scale-out."""
    extra = np.asarray(scaleout_extra_cores, dtype=float)
    n = np.asarray(n_scaleouts, dtype=float)
    out = np.full(extra.shape, np.nan)
    np.divide(extra, n, out=out, where=n > 0)
    return out


def zero_event_substitute(
    events: FloatArray, exposure: FloatArray, estimate: FloatArray, probability: float
) -> tuple[FloatArray, BoolArray]:
    """``estimate`` with each zero-event entry replaced by ``-ln(probability) / exposure``.

    Returns the new estimates and the mask of replaced entries (NaN estimates stay NaN).
    """
    if not 0.0 < probability < 1.0:
        raise ValueError(f"zero_event_probability must be in (0, 1), got {probability}")
    events = np.asarray(events, dtype=float)
    exposure = np.asarray(exposure, dtype=float)
    replaced = (events == 0) & (exposure > 0) & ~np.isnan(estimate)
    out = np.array(estimate, dtype=float)
    out[replaced] = -math.log(probability) / exposure[replaced]
    return out, replaced


@dataclass(frozen=True)
class DeploymentMLEs:
    """Per-deployment estimates (arrays aligned with ``deploymentid``), in-window deployments only."""

    deploymentid: tuple[str, ...]
    #: NaN where no core died: Cluster Admission App. B.1 fits a lifetime only "for each deployment for
    #: which at least one core became inactive", so those deployments are left out, not substituted
    lifetime_rate_per_hour: FloatArray
    lifetime_has_death: BoolArray
    scaleout_rate_per_hour: FloatArray
    scaleout_rate_replaced: BoolArray
    #: NaN where the deployment never scaled out
    scaleout_size_param: FloatArray
    scaleout_size_replaced: BoolArray
    lifetime_hours: FloatArray
    shut_down: BoolArray
    #: sufficient statistics of the marginal fits: VM deaths and VM-hours (cores of one VM share
    #: one lifetime, so VMs are the independent observations), scale-outs, observed hours, extra cores
    vm_deaths: FloatArray
    vm_exposure_hours: FloatArray
    n_scaleouts: FloatArray
    observed_hours: FloatArray
    scaleout_extra_cores: FloatArray
    #: core deaths and core-hours of the lifetime MLE (deaths depend on ``shutdown_cores``)
    core_deaths: FloatArray
    core_exposure_hours: FloatArray
    #: cores at arrival and all cores: the deployment sizes of the Cramér–von Mises calibration
    arrival_cores: FloatArray
    n_cores: FloatArray
    p_rate: float
    p_size: float
    shutdown_cores: str

    def to_polars(self) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "deploymentid": list(self.deploymentid),
                "lifetime_rate_per_hour": self.lifetime_rate_per_hour,
                "lifetime_has_death": self.lifetime_has_death,
                "scaleout_rate_per_hour": self.scaleout_rate_per_hour,
                "scaleout_rate_replaced": self.scaleout_rate_replaced,
                "scaleout_size_param": self.scaleout_size_param,
                "scaleout_size_replaced": self.scaleout_size_replaced,
                "lifetime_hours": self.lifetime_hours,
                "shut_down": self.shut_down,
            }
        )


def _in_window(deployments: pl.DataFrame) -> pl.DataFrame:
    missing = [c for c in DEPLOYMENT_COLUMNS if c not in deployments.columns]
    if missing:
        raise TracelabError(
            f"fct_azure_deployments lacks column(s) {', '.join(missing)}; re-run tracelab priors"
        )
    # sorted so the fits (and the bootstrap draws) do not depend on the SQL engine's row order
    d = deployments.filter(pl.col("arrived_in_window")).sort("deploymentid")
    if d.height == 0:
        raise TracelabError(
            "no deployment arrived inside the window (every deployment's first VM has "
            "vmcreated = 0); the priors need deployments created after the trace start"
        )
    return d


def lifetime_events(
    d: pl.DataFrame, *, censoring: bool, shutdown_cores: str
) -> tuple[FloatArray, FloatArray]:
    """Core deaths and VM deaths per deployment under a treatment of the shutdown's cores.

    ``censored`` (default): a core ended by the shutdown did not die of its own lifetime, so it
    adds exposure only. ``paper``: Cluster Admission App. B counts every core that "became inactive" during
    the month as a death (only cores alive at the end are censored), so those cores are deaths.
    The exposure (core-hours) is the same either way: a death and a censoring at ``t`` both add
    ``t``. ``censoring=False`` counts every core as a death (the biased comparison).
    """
    if shutdown_cores not in SHUTDOWN_CORES:
        raise ValueError(f"shutdown_cores must be one of {SHUTDOWN_CORES}, got {shutdown_cores!r}")

    def col(name: str) -> FloatArray:
        return d.get_column(name).cast(pl.Float64).to_numpy()

    if not censoring:
        return col("n_cores"), col("n_vms")
    if shutdown_cores == "paper":
        shut = d.get_column("shut_down").cast(pl.Float64).to_numpy()
        return col("cores_ended"), col("vm_deaths") + shut * col("n_vms_ending_last")
    return col("core_deaths"), col("vm_deaths")


def deployment_mles(
    deployments: pl.DataFrame,
    *,
    zero_event_probability: float = 0.5,
    size_probability: float | None = None,
    censoring: bool = True,
    shutdown_cores: str = "censored",
) -> DeploymentMLEs:
    """Per-deployment MLEs of the deployments that arrived inside the window.

    ``zero_event_probability`` is p_rate (no scale-out seen), ``size_probability`` p_size (no
    scale-out added more than one core; default the same p). ``censoring=False`` computes the
    naive lifetime rate that counts censored cores as deaths, to show the bias censoring removes.
    """
    d = _in_window(deployments)

    def col(name: str) -> FloatArray:
        return d.get_column(name).cast(pl.Float64).to_numpy()

    exposure = col("core_exposure_hours")
    deaths, vm_deaths = lifetime_events(d, censoring=censoring, shutdown_cores=shutdown_cores)
    has_death = (deaths > 0) & (exposure > 0)
    lam = np.full(len(deaths), np.nan)
    lam[has_death] = lifetime_rate_mle(deaths[has_death], exposure[has_death])

    p_size = zero_event_probability if size_probability is None else size_probability
    n_so = col("n_scaleouts")
    observed = col("observed_hours")
    extra = col("scaleout_extra_cores")
    rate, rate_rep, size, size_rep = substituted_scaleouts(
        n_so, observed, extra, zero_event_probability, p_size
    )
    return DeploymentMLEs(
        deploymentid=tuple(d.get_column("deploymentid").cast(pl.String).to_list()),
        lifetime_rate_per_hour=lam,
        lifetime_has_death=has_death,
        scaleout_rate_per_hour=rate,
        scaleout_rate_replaced=rate_rep,
        scaleout_size_param=size,
        scaleout_size_replaced=size_rep,
        lifetime_hours=col("lifetime_hours"),
        shut_down=d.get_column("shut_down").cast(pl.Boolean).to_numpy().astype(bool),
        vm_deaths=vm_deaths,
        vm_exposure_hours=col("vm_exposure_hours"),
        n_scaleouts=n_so,
        observed_hours=observed,
        scaleout_extra_cores=extra,
        core_deaths=deaths,
        core_exposure_hours=exposure,
        arrival_cores=col("arrival_cores"),
        n_cores=col("n_cores"),
        p_rate=zero_event_probability,
        p_size=p_size,
        shutdown_cores=shutdown_cores if censoring else "deaths",
    )


def substituted_scaleouts(
    n_scaleouts: FloatArray,
    observed_hours: FloatArray,
    extra_cores: FloatArray,
    p_rate: float,
    p_size: float,
) -> tuple[FloatArray, BoolArray, FloatArray, BoolArray]:
    """Scale-out rate and size MLEs with the seed's zero-event substitutes (App. B.1).

    A deployment with no scale-out in ``T`` hours gets ``-ln(p_rate)/T`` (no scale-out then has
    probability p_rate); one whose ``N`` scale-outs added no extra core gets ``-ln(p_size)/N``.
    """
    rate, rate_rep = zero_event_substitute(
        n_scaleouts, observed_hours, scaleout_rate_mle(n_scaleouts, observed_hours), p_rate
    )
    size, size_rep = zero_event_substitute(
        extra_cores, n_scaleouts, scaleout_size_mle(extra_cores, n_scaleouts), p_size
    )
    return rate, rate_rep, size, size_rep


def normalised_scaleout_rate(
    scaleout_rate_per_hour: FloatArray, lifetime_rate_per_hour: FloatArray, alpha: float
) -> FloatArray:
    """``r * (mean core lifetime)**alpha`` with the lifetime ``1/lambda`` in hours."""
    return np.asarray(scaleout_rate_per_hour) * np.asarray(lifetime_rate_per_hour) ** (-alpha)


@dataclass(frozen=True)
class GammaFit:
    """Gamma(shape, rate) fitted by ML with loc = 0; ``rate`` in the inverse unit of the value."""

    shape: float
    rate: float
    n: int
    log_likelihood: float
    ks_distance: float

    @property
    def mean(self) -> float:
        return self.shape / self.rate


def gamma_fit(values: FloatArray) -> GammaFit:
    """ML Gamma fit with the location fixed at 0 (finite, positive values only)."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2 or not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise TracelabError(
            f"a Gamma fit needs at least 2 finite positive values, got {len(x)} "
            f"(min {np.min(x) if len(x) else float('nan')})"
        )
    shape, _, scale = stats.gamma.fit(x, floc=0)
    dist = stats.gamma(shape, scale=scale)
    return GammaFit(
        shape=float(shape),
        rate=float(1.0 / scale),
        n=len(x),
        log_likelihood=float(dist.logpdf(x).sum()),
        ks_distance=float(stats.kstest(x, dist.cdf).statistic),
    )


@dataclass(frozen=True)
class MarginalGammaFit:
    """Gamma(shape, rate) prior fitted by the marginal (Gamma-Poisson) likelihood of the counts."""

    shape: float
    rate: float
    n: int
    log_likelihood: float
    #: only for the normalised scale-out rate: the exponent fitted jointly
    alpha: float | None = None

    @property
    def mean(self) -> float:
        return self.shape / self.rate


def _marginal_loglik(
    log_shape: float, log_rate: float, events: FloatArray, exposure: FloatArray
) -> float:
    a, b = math.exp(log_shape), math.exp(log_rate)
    # integral of (lambda E)^k exp(-lambda E) Gamma(lambda; a, b) d lambda, per deployment (the
    # E^k factor matters when E depends on alpha; k! is left out, it depends on no parameter)
    return float(
        np.sum(
            events * np.log(exposure)
            + a * math.log(b)
            - (a + events) * np.log(b + exposure)
            + special.gammaln(a + events)
            - special.gammaln(a)
        )
    )


def marginal_gamma_fit(events: FloatArray, exposure: FloatArray) -> MarginalGammaFit:
    """Gamma prior of a per-deployment rate from counts and exposures, by marginal likelihood.

    Each deployment contributes ``lambda^k exp(-lambda E)`` (``k`` events in exposure ``E``: core
    deaths in core-hours with censored cores adding exposure only, scale-outs in observed hours,
    or extra cores in scale-outs); integrating ``lambda`` over Gamma(shape, rate) gives a
    closed form (the Gamma is conjugate, Cluster Admission App. B.2). Unlike the two-stage fit this needs
    no per-deployment MLE, so zero counts and small deployments enter without bias or substitutes.
    Deployments with zero exposure carry no information and are dropped.
    """
    k = np.asarray(events, dtype=float)
    e = np.asarray(exposure, dtype=float)
    keep = e > 0
    k, e = k[keep], e[keep]
    if len(k) < 2 or k.sum() == 0:
        raise TracelabError(
            f"a marginal Gamma fit needs events in at least 2 deployments, got {len(k)}"
        )
    rate0 = k.sum() / e.sum()
    res = optimize.minimize(
        lambda th: -_marginal_loglik(th[0], th[1], k, e),
        x0=np.array([0.0, -math.log(rate0)]),
        method="Nelder-Mead",
        options={"xatol": 1e-7, "fatol": 1e-9, "maxiter": 4000},
    )
    return MarginalGammaFit(
        shape=float(math.exp(res.x[0])),
        rate=float(math.exp(res.x[1])),
        n=len(k),
        log_likelihood=float(-res.fun),
    )


_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite.hermgauss(24)
_GH_LOG_WEIGHTS = np.log(_GH_WEIGHTS) + _GH_NODES**2


@dataclass(frozen=True)
class JointFit:
    """Lifetime-rate prior, normalised scale-out prior, alpha and shutdown rate fitted together.

    ``*_se`` are standard errors from the observed information (numerical Hessian) of the
    parameter on the scale it was optimised: log for shape, rate and shutdown rate, plain for alpha.
    """

    lifetime_shape: float
    lifetime_rate: float
    scaleout_shape: float
    scaleout_rate: float
    alpha: float
    shutdown_rate: float
    n: int
    log_likelihood: float
    log_se: dict[str, float]
    alpha_fixed: bool

    def interval(self, name: str, level_z: float = 1.959963984540054) -> Interval:
        """Wald 95% interval of one parameter (on the log scale for the positive ones)."""
        value = getattr(self, name)
        se = self.log_se.get(name, float("nan"))
        if name == "alpha":
            low, high = value - level_z * se, value + level_z * se
        else:
            # capped: on data the model does not fit, the SE can be huge and exp() overflow
            z = min(level_z * se, 700.0)
            low, high = value * math.exp(-z), value * math.exp(z)
        return Interval(low=low, high=high, method="Wald, observed information")


_JOINT_NAMES = (
    "lifetime_shape",
    "lifetime_rate",
    "scaleout_shape",
    "scaleout_rate",
    "alpha",
    "shutdown_rate",
)


def _joint_negative_loglik(theta: FloatArray, data: tuple[FloatArray, ...]) -> float:
    deaths, vm_hours, scaleouts, observed, shut, age = data
    a1, b1, a2, b2, sd = np.exp(theta[[0, 1, 2, 3, 5]])
    alpha = float(theta[4])
    # the lifetime part and the shutdown part are Gamma kernels in lambda: lambda^A exp(-B lambda)
    shape = a1 + deaths + shut
    rate = b1 + vm_hours + sd * age
    log_c = (
        a1 * math.log(b1)
        - shape * np.log(rate)
        + special.gammaln(shape)
        - special.gammaln(a1)
        + shut * math.log(sd)
    )
    # integrate lambda over Gamma(shape, rate) by Gauss-Hermite on log(lambda), centred on its
    # mean with its standard deviation (digamma / trigamma)
    mu = special.digamma(shape) - np.log(rate)
    sigma = np.sqrt(special.polygamma(1, shape))
    y = mu[:, None] + math.sqrt(2.0) * sigma[:, None] * _GH_NODES[None, :]
    log_density = (
        (shape * np.log(rate) - special.gammaln(shape))[:, None]
        + shape[:, None] * y
        - rate[:, None] * np.exp(y)
    )
    correction = _GH_LOG_WEIGHTS[None, :] + np.log(math.sqrt(2.0) * sigma)[:, None]
    # scale-outs: Poisson(rho lambda^alpha T), rho ~ Gamma(a2, b2) integrated in closed form
    exposure = np.exp(alpha * y) * observed[:, None]
    scaleout = (
        scaleouts[:, None] * np.log(exposure)
        + a2 * math.log(b2)
        + (special.gammaln(a2 + scaleouts) - special.gammaln(a2))[:, None]
        - (a2 + scaleouts)[:, None] * np.log(b2 + exposure)
    )
    ll = log_c + special.logsumexp(log_density + correction + scaleout, axis=1)
    return -float(ll.sum())


def _numerical_hessian(f: Any, x: FloatArray, step: float = 1e-3) -> FloatArray:
    k = len(x)
    h: FloatArray = np.zeros((k, k))
    for i in range(k):
        for j in range(i, k):
            ei = np.zeros(k)
            ej = np.zeros(k)
            ei[i] = step
            ej[j] = step
            value = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (
                4 * step * step
            )
            h[i, j] = h[j, i] = value
    return h


def joint_marginal_fit(m: DeploymentMLEs, alpha: float | None = None) -> JointFit:
    """Gamma priors of ``lambda`` and ``rho``, ``alpha`` and the shutdown rate by marginal likelihood.

    Per deployment the history has likelihood ``lambda^D e^{-lambda E}`` (VM deaths ``D`` in
    VM-hours ``E``; censored VMs add exposure only) times ``(rho lambda^alpha)^N
    e^{-rho lambda^alpha T}`` (``N`` scale-outs in ``T`` observed hours) times the shutdown term
    ``(theta lambda)^S e^{-theta lambda age}``. Integrating ``rho`` and ``lambda`` over their Gamma
    priors (``rho`` in closed form, ``lambda`` by 24-point Gauss-Hermite) gives the marginal
    likelihood of the population parameters, maximised with scipy (Nelder-Mead on log scales).
    Because ``lambda`` enters the scale-out term when ``alpha != 0``, fitting the lifetime prior
    alone would be biased; no per-deployment MLE is needed, so zero counts need no substitute.
    """
    data = (
        m.vm_deaths,
        m.vm_exposure_hours,
        m.n_scaleouts,
        m.observed_hours,
        m.shut_down.astype(float),
        m.lifetime_hours,
    )
    start_lifetime = marginal_gamma_fit(m.vm_deaths, m.vm_exposure_hours)
    start_scaleout = marginal_gamma_fit(m.n_scaleouts, m.observed_hours)
    shut = max(float(m.shut_down.sum()), 0.5)
    start_sd = shut / float(np.sum(m.lifetime_hours * start_lifetime.mean))
    x0 = np.array(
        [
            math.log(start_lifetime.shape),
            math.log(start_lifetime.rate),
            math.log(start_scaleout.shape),
            math.log(start_scaleout.rate),
            0.0 if alpha is None else alpha,
            math.log(start_sd),
        ]
    )
    free = [0, 1, 2, 3, 5] if alpha is not None else [0, 1, 2, 3, 4, 5]

    def negative(x_free: FloatArray) -> float:
        x = x0.copy()
        x[free] = x_free
        return _joint_negative_loglik(x, data)

    res = optimize.minimize(
        negative,
        x0[free],
        method="Nelder-Mead",
        options={"xatol": 1e-5, "fatol": 1e-5, "maxiter": 6000, "adaptive": True},
    )
    x = x0.copy()
    x[free] = res.x
    try:
        cov = np.linalg.inv(_numerical_hessian(negative, np.asarray(res.x, dtype=float)))
        se_free = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    except np.linalg.LinAlgError:
        se_free = np.full(len(free), np.nan)
    se = dict.fromkeys(_JOINT_NAMES, float("nan"))
    for pos, index in enumerate(free):
        se[_JOINT_NAMES[index]] = float(se_free[pos])
    a1, b1, a2, b2, sd = (float(v) for v in np.exp(x[[0, 1, 2, 3, 5]]))
    return JointFit(
        lifetime_shape=a1,
        lifetime_rate=b1,
        scaleout_shape=a2,
        scaleout_rate=b2,
        alpha=float(x[4]),
        shutdown_rate=sd,
        n=len(m.deploymentid),
        log_likelihood=-float(res.fun),
        log_se=se,
        alpha_fixed=alpha is not None,
    )


@dataclass(frozen=True)
class ExponentialFit:
    """Right-censored exponential fit: rate per unit of the exposure."""

    rate: float
    n: int
    events: int
    log_likelihood: float


def censored_exponential_fit(exposure: FloatArray, event: BoolArray) -> ExponentialFit:
    """MLE events / total exposure; log-likelihood ``d ln(rate) - rate * sum(exposure)``."""
    x = np.asarray(exposure, dtype=float)
    e = np.asarray(event, dtype=bool)
    total = float(x.sum())
    d = int(e.sum())
    rate = d / total if total > 0 else float("nan")
    ll = (d * math.log(rate) if d else 0.0) - rate * total if total > 0 else float("nan")
    return ExponentialFit(rate=rate, n=len(x), events=d, log_likelihood=ll)


@dataclass(frozen=True)
class _PointFits:
    lifetime: GammaFit
    alpha: float
    normalised: GammaFit
    size: GammaFit
    shutdown: ExponentialFit
    marginal_size: MarginalGammaFit


def _point_fits(m: DeploymentMLEs, idx: npt.NDArray[np.int64], alpha: float | None) -> _PointFits:
    """Cluster Admission App. B.2 on the deployments ``idx``.

    Lifetime, alpha, normalised rate and shutdown use only deployments with a core death (the
    others have no lifetime MLE, App. B.1); the size fit uses every deployment with a scale-out.
    """
    has = m.lifetime_has_death[idx]
    lam = m.lifetime_rate_per_hour[idx][has]
    rate = m.scaleout_rate_per_hour[idx][has]
    size = m.scaleout_size_param[idx]
    a = alpha_by_min_mad(rate, lam) if alpha is None else alpha
    return _PointFits(
        marginal_size=marginal_gamma_fit(m.scaleout_extra_cores[idx], m.n_scaleouts[idx]),
        lifetime=gamma_fit(lam),
        alpha=a,
        normalised=gamma_fit(normalised_scaleout_rate(rate, lam, a)),
        size=gamma_fit(size[~np.isnan(size)]),
        shutdown=censored_exponential_fit(m.lifetime_hours[idx][has] * lam, m.shut_down[idx][has]),
    )


def _size_data(m: DeploymentMLEs) -> SizeData:
    return SizeData(
        arrival_cores=m.arrival_cores, observed_hours=m.observed_hours, n_cores=m.n_cores
    )


def two_stage_size_model(
    m: DeploymentMLEs, p_rate: float, p_size: float, alpha: float | None
) -> SizeModel:
    """The two-stage priors (lifetime, normalised rate, alpha, size) refitted at (p_rate, p_size)."""
    rate, _, size, _ = substituted_scaleouts(
        m.n_scaleouts, m.observed_hours, m.scaleout_extra_cores, p_rate, p_size
    )
    has = m.lifetime_has_death
    lam = m.lifetime_rate_per_hour[has]
    a = alpha_by_min_mad(rate[has], lam) if alpha is None else alpha
    life = gamma_fit(lam)
    norm = gamma_fit(normalised_scaleout_rate(rate[has], lam, a))
    sz = gamma_fit(size[~np.isnan(size)])
    return SizeModel(life.shape, life.rate, norm.shape, norm.rate, a, sz.shape, sz.rate)


def size_cvm_distance(
    m: DeploymentMLEs, p_rate: float, p_size: float, alpha: float | None, seed: int
) -> float:
    """Discrete CvM distance of deployment sizes (cores), data vs the model fitted at the p's."""
    data = _size_data(m)
    u = calibration_uniforms(len(m.deploymentid), seed)
    return discrete_cvm_distance(
        data.n_cores, simulated_sizes(two_stage_size_model(m, p_rate, p_size, alpha), data, u)
    )


def calibrate_zero_event_probabilities(
    m: DeploymentMLEs, alpha: float | None, seed: int
) -> Calibration:
    """(p_rate, p_size) minimising :func:`size_cvm_distance` over the grid (Cluster Admission App. B.1).

    The lifetime prior depends on neither p, the rate part only on p_rate and the size prior only
    on p_size, so each part is fitted once per grid value and the grid only recombines them.
    """
    data = _size_data(m)
    u = calibration_uniforms(len(m.deploymentid), seed)
    has = m.lifetime_has_death
    lam = m.lifetime_rate_per_hour[has]
    life = gamma_fit(lam)
    rate_parts: dict[float, tuple[float, GammaFit, FloatArray]] = {}
    size_parts: dict[float, GammaFit] = {}

    def distance(p_rate: float, p_size: float) -> float:
        rate, _, size, _ = substituted_scaleouts(
            m.n_scaleouts, m.observed_hours, m.scaleout_extra_cores, p_rate, p_size
        )
        if p_size not in size_parts:
            size_parts[p_size] = gamma_fit(size[~np.isnan(size)])
        sz = size_parts[p_size]
        if p_rate not in rate_parts:
            a = alpha_by_min_mad(rate[has], lam) if alpha is None else alpha
            norm = gamma_fit(normalised_scaleout_rate(rate[has], lam, a))
            part = SizeModel(life.shape, life.rate, norm.shape, norm.rate, a, 1.0, 1.0)
            rate_parts[p_rate] = (a, norm, simulated_scaleouts(part, data, u))
        a, norm, scaleouts = rate_parts[p_rate]
        model = SizeModel(life.shape, life.rate, norm.shape, norm.rate, a, sz.shape, sz.rate)
        return discrete_cvm_distance(data.n_cores, simulated_sizes_from(model, data, u, scaleouts))

    return calibrate(distance)


@dataclass(frozen=True)
class AzurePriors:
    """Every population fit of stage ``priors`` with its bootstrap intervals."""

    mles: DeploymentMLEs
    lifetime_rate: GammaFit
    alpha: float
    alpha_fixed: bool
    normalised_scaleout_rate: GammaFit
    scaleout_size: GammaFit
    shutdown: ExponentialFit
    #: lifetime and normalised scale-out priors, alpha, shutdown by the joint marginal likelihood
    joint: JointFit
    marginal_scaleout_size: MarginalGammaFit
    #: deployments arriving inside the window per hour of window
    arrival_rate_per_hour: float
    n_arrivals: int
    window_hours: float
    #: name -> (low, high) bootstrap percentile bounds
    ci: dict[str, tuple[float, float]]
    n_boot: int
    seed: int
    #: the CvM calibration of (p_rate, p_size); None when p was fixed by the user
    calibration: Calibration | None
    censoring: bool
    #: the trace whose deployments were fitted (azure-2019's share the model)
    trace: str = TRACE

    @property
    def zero_event_probability(self) -> float:
        return self.mles.p_rate

    def records(self) -> list[FittedParameter]:
        """The stage's records for ``write_stage_params``."""
        return priors_records(self)


def azure_priors(
    deployments: pl.DataFrame,
    *,
    window_hours: float,
    seed: int = 0,
    n_boot: int = 200,
    zero_event_probability: float | None = None,
    censoring: bool = True,
    alpha: float | None = None,
    shutdown_cores: str = "censored",
    trace: str = TRACE,
) -> AzurePriors:
    """Per-deployment MLEs, then every population fit with seeded bootstrap CIs.

    ``zero_event_probability=None`` calibrates p_rate and p_size by Cramér–von Mises (Cluster Admission
    App. B.1, once on all deployments; the bootstrap keeps them); a number fixes both.
    ``alpha=None`` estimates alpha (the paper's minimal MAD, hours); a number fixes it.
    """
    calibration: Calibration | None = None
    if zero_event_probability is None:
        first = deployment_mles(deployments, censoring=censoring, shutdown_cores=shutdown_cores)
        calibration = calibrate_zero_event_probabilities(first, alpha, seed)
        p_rate, p_size = calibration.p_rate, calibration.p_size
    else:
        p_rate = p_size = zero_event_probability
    m = deployment_mles(
        deployments,
        zero_event_probability=p_rate,
        size_probability=p_size,
        censoring=censoring,
        shutdown_cores=shutdown_cores,
    )
    n = len(m.deploymentid)
    point = _point_fits(m, np.arange(n), alpha)
    rng = np.random.default_rng(seed)
    boots: dict[str, list[float]] = {k: [] for k in _CI_KEYS}
    for _ in range(n_boot):
        b = _point_fits(m, rng.integers(0, n, n), alpha)
        for key, value in _ci_values(b).items():
            boots[key].append(value)
    ci = {
        k: (float(np.nanpercentile(v, 2.5)), float(np.nanpercentile(v, 97.5)))
        for k, v in boots.items()
        if v
    }
    return AzurePriors(
        mles=m,
        lifetime_rate=point.lifetime,
        alpha=point.alpha,
        alpha_fixed=alpha is not None,
        normalised_scaleout_rate=point.normalised,
        scaleout_size=point.size,
        shutdown=point.shutdown,
        joint=joint_marginal_fit(m, alpha),
        marginal_scaleout_size=point.marginal_size,
        arrival_rate_per_hour=n / window_hours,
        n_arrivals=n,
        window_hours=window_hours,
        ci=ci,
        n_boot=n_boot,
        seed=seed,
        calibration=calibration,
        censoring=censoring,
        trace=trace,
    )


_CI_KEYS = (
    "core_lifetime_rate.shape",
    "core_lifetime_rate.rate",
    "alpha",
    "normalised_scaleout_rate.shape",
    "normalised_scaleout_rate.rate",
    "scaleout_size.shape",
    "scaleout_size.rate",
    "shutdown.rate",
    "marginal_scaleout_size.shape",
    "marginal_scaleout_size.rate",
)


def _ci_values(p: _PointFits) -> dict[str, float]:
    return {
        "core_lifetime_rate.shape": p.lifetime.shape,
        "core_lifetime_rate.rate": p.lifetime.rate,
        "alpha": p.alpha,
        "normalised_scaleout_rate.shape": p.normalised.shape,
        "normalised_scaleout_rate.rate": p.normalised.rate,
        "scaleout_size.shape": p.size.shape,
        "scaleout_size.rate": p.size.rate,
        "shutdown.rate": p.shutdown.rate,
        "marginal_scaleout_size.shape": p.marginal_size.shape,
        "marginal_scaleout_size.rate": p.marginal_size.rate,
    }


def _interval(ci: dict[str, tuple[float, float]], key: str) -> dict[str, Interval]:
    if key not in ci:
        return {}
    low, high = ci[key]
    return {key.rsplit(".", 1)[-1]: Interval(low=low, high=high)}


def _gamma_record(
    p: AzurePriors, key: str, fit: GammaFit, value_unit: str, rate_unit: str, notes: str
) -> FittedParameter:
    return FittedParameter(
        name=f"{key}_prior",
        distribution="gamma",
        parameters={"shape": Quantity(fit.shape, ""), "rate": Quantity(fit.rate, rate_unit)},
        method="maximum likelihood, scipy.stats.gamma.fit with loc fixed at 0",
        n=fit.n,
        stage=STAGE,
        trace=p.trace,
        log_likelihood=fit.log_likelihood,
        ks_distance=fit.ks_distance,
        ci={**_interval(p.ci, f"{key}.shape"), **_interval(p.ci, f"{key}.rate")},
        values={"value_unit": value_unit, "mean": fit.mean, "bootstrap_replicates": p.n_boot},
        notes=notes,
    )


def _two_stage_notes(p: AzurePriors) -> dict[str, str]:
    """The notes of the two-stage records: what was left out and which p was used (App. B.1)."""
    m = p.mles
    n = len(m.deploymentid)
    no_death = int((~m.lifetime_has_death).sum())
    how = (
        "calibrated by discrete Cramér–von Mises on deployment sizes"
        if p.calibration is not None
        else "fixed"
    )
    return {
        "lifetime": f"per-deployment exponential core-lifetime rate, "
        f"{'right-censored MLE' if p.censoring else 'IGNORING censoring'}; shutdown cores "
        f"{m.shutdown_cores}; {no_death} of {n} deployments without a core death left out "
        "(Cluster Admission App. B.1: not substituted)",
        "rate": f"scale-out rate (1/hour) x mean core lifetime (hour)^alpha, alpha = {p.alpha:.6g} "
        f"(criterion in {ALPHA_TIME_UNIT}s); deployments without a lifetime MLE left out; "
        f"no scale-out -> -ln(p_rate)/observed hours, p_rate = {m.p_rate:g} ({how}): "
        f"{int(m.scaleout_rate_replaced.sum())} of {n}",
        "size": f"a scale-out adds 1 + Poisson(size) cores; deployments without a scale-out left "
        f"out ({int(np.isnan(m.scaleout_size_param).sum())}); no extra core -> "
        f"-ln(p_size)/scale-outs, p_size = {m.p_size:g} ({how}): "
        f"{int(m.scaleout_size_replaced.sum())}",
    }


def _alpha_record(p: AzurePriors) -> FittedParameter:
    at_bound = min(abs(p.alpha - b) for b in ALPHA_BOUNDS) < 1e-3
    return FittedParameter(
        name="scaleout_alpha",
        distribution="constant",
        parameters={"alpha": Quantity(p.alpha, "")},
        method="fixed"
        if p.alpha_fixed
        else f"minimal mean absolute deviation of the normalised rates (Cluster Admission App. B.2), "
        f"lifetimes in {ALPHA_TIME_UNIT}s",
        n=int(p.mles.lifetime_has_death.sum()),
        stage=STAGE,
        trace=p.trace,
        ci={} if p.alpha_fixed else _interval(p.ci, "alpha"),
        values={"time_unit": ALPHA_TIME_UNIT, "at_search_bound": at_bound},
        notes="exponent of the mean core lifetime in the normalised scale-out rate; the paper's "
        "criterion depends on the time unit (rescaling lifetimes rescales the MAD by unit^alpha)"
        + ("; it reached the search bound: no interior minimum in this unit" if at_bound else ""),
    )


def _shutdown_record(p: AzurePriors) -> FittedParameter:
    return FittedParameter(
        name="deployment_shutdown",
        distribution="exponential",
        parameters={"rate": Quantity(p.shutdown.rate, "1/core lifetime")},
        method="maximum likelihood, right-censored exponential (events / total exposure)",
        n=p.shutdown.n,
        stage=STAGE,
        trace=p.trace,
        log_likelihood=p.shutdown.log_likelihood,
        ci=_interval(p.ci, "shutdown.rate"),
        values={"shutdowns": p.shutdown.events},
        notes="maximal deployment age in mean core lifetimes (age x lifetime rate) of deployments "
        "with a lifetime MLE; a deployment whose >= 3 VMs end at one timestamp was shut down, all "
        "others censored at their age; KS distance not defined under censoring",
    )


def _calibration_record(p: AzurePriors) -> list[FittedParameter]:
    c = p.calibration
    if c is None:
        return []
    return [
        FittedParameter(
            name="zero_event_probability",
            distribution="constant",
            parameters={"p_rate": Quantity(c.p_rate, ""), "p_size": Quantity(c.p_size, "")},
            method="minimal discrete Cramér–von Mises distance of deployment sizes (cores), data "
            "vs deployments drawn from the two-stage model (Cluster Admission App. B.1), grid search",
            n=len(p.mles.deploymentid),
            stage=STAGE,
            trace=p.trace,
            values={"cvm_distance": c.distance, "grid": [list(g) for g in c.grid]},
            notes="each simulated deployment keeps a real one's arrival cores and scale-out hours "
            f"({CALIBRATION_REPLICATES} per real one, seeded); the bootstrap keeps these p",
        )
    ]


def priors_records(p: AzurePriors) -> list[FittedParameter]:
    """FittedParameter records of every fit (units explicit, see the module docstring)."""
    notes = _two_stage_notes(p)
    a = round(p.alpha, 4)
    return [
        _gamma_record(
            p, "core_lifetime_rate", p.lifetime_rate, "1/hour", "hour", notes["lifetime"]
        ),
        _gamma_record(
            p,
            "normalised_scaleout_rate",
            p.normalised_scaleout_rate,
            f"hour^{a - 1:g}",
            f"hour^{1 - a:g}",
            notes["rate"],
        ),
        _gamma_record(p, "scaleout_size", p.scaleout_size, "cores", "1/cores", notes["size"]),
        _alpha_record(p),
        _shutdown_record(p),
        *_calibration_record(p),
        *_marginal_records(p),
        FittedParameter(
            name="deployment_arrival_rate",
            distribution="poisson",
            parameters={"rate": Quantity(p.arrival_rate_per_hour, "1/hour")},
            method="maximum likelihood: deployments arriving in the window / window length",
            n=p.n_arrivals,
            stage=STAGE,
            trace=p.trace,
            ci={"rate": _poisson_interval(p.n_arrivals, p.window_hours)},
            values={"window_hours": p.window_hours},
        ),
    ]


_JOINT_METHOD = (
    "maximum joint marginal likelihood (Gamma priors integrated out; scipy Nelder-Mead, "
    "lambda by Gauss-Hermite)"
)


def _joint_gamma_record(
    p: AzurePriors, key: str, param: str, units: tuple[str, str], notes: str
) -> FittedParameter:
    """One Gamma prior of the joint fit; ``param`` is ``lifetime`` or ``scaleout``."""
    j = p.joint
    shape, rate = getattr(j, f"{param}_shape"), getattr(j, f"{param}_rate")
    return FittedParameter(
        name=f"{key}_prior_marginal",
        distribution="gamma",
        parameters={"shape": Quantity(shape, ""), "rate": Quantity(rate, units[1])},
        method=_JOINT_METHOD,
        n=j.n,
        stage=STAGE,
        trace=p.trace,
        log_likelihood=j.log_likelihood,
        ci={"shape": j.interval(f"{param}_shape"), "rate": j.interval(f"{param}_rate")},
        values={"value_unit": units[0], "mean": shape / rate, "recommended": True},
        notes=notes + "; log_likelihood is that of the joint fit",
    )


def _marginal_size_record(p: AzurePriors) -> FittedParameter:
    size = p.marginal_scaleout_size
    return FittedParameter(
        name="scaleout_size_prior_marginal",
        distribution="gamma",
        parameters={"shape": Quantity(size.shape, ""), "rate": Quantity(size.rate, "1/cores")},
        method="maximum marginal likelihood, Gamma-Poisson (scipy Nelder-Mead)",
        n=size.n,
        stage=STAGE,
        trace=p.trace,
        log_likelihood=size.log_likelihood,
        ci={
            **_interval(p.ci, "marginal_scaleout_size.shape"),
            **_interval(p.ci, "marginal_scaleout_size.rate"),
        },
        values={
            "value_unit": "cores",
            "mean": size.mean,
            "bootstrap_replicates": p.n_boot,
            "recommended": True,
        },
        notes="extra cores ~ Poisson(size * scale-outs); deployments without a scale-out "
        "carry no information",
    )


def _marginal_records(p: AzurePriors) -> list[FittedParameter]:
    """The recommended records: the joint marginal fit (and the marginal size prior)."""
    j = p.joint
    a = round(j.alpha, 4)
    shutdown = "censored" if p.mles.shutdown_cores == "censored" else "counted as deaths"
    return [
        _joint_gamma_record(
            p,
            "core_lifetime_rate",
            "lifetime",
            ("1/hour", "hour"),
            "VM deaths in VM-hours (cores of a VM share its lifetime); VMs alive at the end are "
            f"censored, VMs ended by a shutdown {shutdown}",
        ),
        _joint_gamma_record(
            p,
            "normalised_scaleout_rate",
            "scaleout",
            (f"hour^{a - 1:g}", f"hour^{1 - a:g}"),
            f"scale-outs ~ Poisson(rho * lambda^alpha * observed hours), alpha = {j.alpha:.6g}",
        ),
        _marginal_size_record(p),
        FittedParameter(
            name="scaleout_alpha_marginal",
            distribution="constant",
            parameters={"alpha": Quantity(j.alpha, "")},
            method="fixed" if j.alpha_fixed else _JOINT_METHOD,
            n=j.n,
            stage=STAGE,
            trace=p.trace,
            ci={} if j.alpha_fixed else {"alpha": j.interval("alpha")},
            values={"time_unit": ALPHA_TIME_UNIT, "recommended": True},
        ),
        FittedParameter(
            name="deployment_shutdown_marginal",
            distribution="exponential",
            parameters={"rate": Quantity(j.shutdown_rate, "1/core lifetime")},
            method=_JOINT_METHOD,
            n=j.n,
            stage=STAGE,
            trace=p.trace,
            ci={"rate": j.interval("shutdown_rate")},
            values={"shutdowns": int(p.mles.shut_down.sum()), "recommended": True},
            notes="maximal age in mean core lifetimes; only shutdowns with >= 3 VMs are seen",
        ),
    ]


def _poisson_interval(count: int, exposure: float, level: float = 0.95) -> Interval:
    tail = (1.0 - level) / 2.0
    low = 0.0 if count == 0 else stats.chi2.ppf(tail, 2 * count) / 2.0
    high = stats.chi2.ppf(1.0 - tail, 2 * count + 2) / 2.0
    return Interval(
        low=float(low / exposure), high=float(high / exposure), level=level, method="exact Poisson"
    )


def priors_summary(p: AzurePriors) -> dict[str, Any]:
    """Small JSON summary of the stage (counts and the choices made)."""
    m = p.mles
    return {
        "trace": p.trace,
        "stage": STAGE,
        "deployments_in_window": len(m.deploymentid),
        "window_hours": p.window_hours,
        "censoring": p.censoring,
        "shutdown_cores": m.shutdown_cores,
        "zero_event_probability": {"p_rate": m.p_rate, "p_size": m.p_size},
        "zero_event_probability_calibrated": p.calibration is not None,
        "deployments_without_core_death": int((~m.lifetime_has_death).sum()),
        "replaced_zero_mles": {
            "scaleout_rate": int(m.scaleout_rate_replaced.sum()),
            "scaleout_size": int(m.scaleout_size_replaced.sum()),
        },
        "deployments_without_scaleout": int(np.isnan(m.scaleout_size_param).sum()),
        "shutdowns": p.shutdown.events,
        "alpha": p.alpha,
        "bootstrap": {"replicates": p.n_boot, "seed": p.seed},
        "fits": {r.name: r.to_dict() for r in p.records()},
        HEADLINE: headline(
            "recommended_n",
            "deployments of the joint marginal core-lifetime fit over the "
            f"{p.window_hours:g} h window, "
            + (
                "lifetimes right-censored at the window's end"
                if p.censoring
                else "censoring ignored"
            ),
        ),
    }


def priors_table(p: AzurePriors) -> pl.DataFrame:
    """One row per (record, parameter) for ``priors.parquet``."""
    rows: list[dict[str, Any]] = []
    for r in p.records():
        for name, q in r.parameters.items():
            iv = r.ci.get(name)
            rows.append(
                {
                    "name": r.name,
                    "distribution": r.distribution,
                    "parameter": name,
                    "value": q.value,
                    "unit": q.unit,
                    "ci_low": None if iv is None else iv.low,
                    "ci_high": None if iv is None else iv.high,
                    "n": r.n,
                    "log_likelihood": r.log_likelihood,
                    "ks_distance": r.ks_distance,
                    "method": r.method,
                }
            )
    return pl.DataFrame(rows)


def priors_tables(p: AzurePriors) -> dict[str, pl.DataFrame]:
    """The stage's Parquet tables by file stem: per-deployment ``deployment_mles`` and ``priors``."""
    return {"deployment_mles": p.mles.to_polars(), "priors": priors_table(p)}
