"""google-2019 Gamma priors against the generator's truth.

The generator (analysis/synthetic/google2019.py) is run with every run ending in FINISH (no
evictions, so no second runs) and 4-hour mean runs (many long instances): each run lasts
``Exponential(duration_mean_s)``; each instance's CPU level is ``mu ~ Gamma(cpu_shape, cpu_scale)``
and a window's inst value ``mu * U(0.8, 1.2) * U(0.5, 1.5)``. The lake and the derived tables are
made by the real ``tracelab ingest`` and ``tracelab derive``; the expected values below come from
that model (or from TRUTH.json's per-instance durations), never from the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from cli_helpers import tracelab_output
from scipy import integrate, optimize, special, stats

from tracelab.analysis.priors import google2019 as g19
from tracelab.analysis.synthetic.google2019 import FINISH, WINDOW_US, Model, generate_google_2019

MODEL = Model(end_mix=(1.0, 0.0, 0.0, 0.0), duration_mean_s=4 * 3_600.0, cpu_shape=2.0)
SEED = 7


def _tracelab(*args: str) -> None:
    rc, out = tracelab_output(*args)
    assert rc == 0, out


@pytest.fixture(scope="module")
def generated(
    prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], pl.LazyFrame, pl.LazyFrame, g19.Google2019Fits]:
    root = tmp_path_factory.mktemp("g2019priors")
    raw, data = root / "raw", root / "data"
    truth = json.loads(generate_google_2019(raw, seed=SEED, scale="small", model=MODEL).read_text())
    _tracelab("ingest", "--data", str(data), "--trace", g19.TRACE, "--raw", str(raw))
    _tracelab("derive", "--data", str(data), "--trace", g19.TRACE)
    derived = data / "derived" / g19.TRACE
    times = pl.scan_parquet(derived / f"{g19.INSTANCE_TIMES}.parquet")
    usage = pl.scan_parquet(derived / f"{g19.USAGE_STATS}.parquet")
    return truth, times, usage, g19.google2019_fits(times, usage, seed=1, n_bootstrap=50)


def _record(fits: g19.Google2019Fits, name: str) -> tuple[float, float, int]:
    rec = next(r for r in fits.records if r.name == name)
    assert rec.trace == "google-2019"
    assert rec.stage == "priors"
    return float(rec.parameters["shape"].value), float(rec.parameters["rate"].value), rec.n


def test_execution_time_prior_is_the_fit_of_the_generated_finished_runs(
    generated: tuple[dict[str, Any], pl.LazyFrame, pl.LazyFrame, g19.Google2019Fits],
) -> None:
    truth, _, _, fits = generated
    # every run that ended inside the window ended with FINISH; TRUTH.json has its duration
    durations = np.array(
        [t["duration_s"] for t in truth["instance_truths"] if t["end_type"] == FINISH]
    )
    assert durations.size == truth["event_counts"]["instance_events"][str(FINISH)]
    shape, rate, n = _record(fits, g19.EXECUTION)
    assert n == durations.size
    expected_shape, _, scale = stats.gamma.fit(durations, floc=0)
    assert shape == pytest.approx(expected_shape, rel=1e-6)
    assert rate == pytest.approx(1 / scale, rel=1e-6)


def _truncated_exponential_gamma_limit(mean_s: float, window_s: float) -> tuple[float, float]:
    """(shape, mean) the Gamma MLE tends to on runs that start uniformly in the window and are
    seen only when they end inside it: density proportional to e^(-d/m) (W - d) on (0, W)."""

    def density(d: float) -> float:
        return float(np.exp(-d / mean_s) * (window_s - d))

    def moment(f: Any) -> float:
        return float(integrate.quad(lambda d: f(d) * density(d), 0, window_s, limit=200)[0])

    total = moment(lambda d: 1.0)
    mean = moment(lambda d: d) / total
    mean_log = moment(lambda d: np.log(d) if d > 0 else 0.0) / total
    # the MLE's shape k solves ln k - digamma(k) = ln E[X] - E[ln X]
    gap = np.log(mean) - mean_log
    shape = optimize.brentq(lambda k: np.log(k) - special.digamma(k) - gap, 1e-3, 100.0)
    return float(shape), mean


def test_execution_time_prior_recovers_the_generators_runs(
    generated: tuple[dict[str, Any], pl.LazyFrame, pl.LazyFrame, g19.Google2019Fits],
) -> None:
    _, _, _, fits = generated
    shape, rate, n = _record(fits, g19.EXECUTION)
    k, mean = _truncated_exponential_gamma_limit(MODEL.duration_mean_s, WINDOW_US / 1e6)
    # ~1,000 runs: shape SE ~0.04, mean SE ~350 s; untruncated it would be shape 1, mean 14,400 s
    # (the window cuts the long runs: k = 1.03, mean 11,570 s by the integral). A scale taken for
    # the rate, or the runs still going at the end counted, misses these.
    assert n > 800
    assert abs(shape - k) < 0.12, (shape, k)
    assert abs(shape / rate - mean) < 1_100, (shape / rate, mean)


def test_usage_priors_recover_the_generators_cpu_levels(
    generated: tuple[dict[str, Any], pl.LazyFrame, pl.LazyFrame, g19.Google2019Fits],
) -> None:
    _, _, _, fits = generated
    mean_shape, mean_rate, n = _record(fits, g19.INST_MEAN)
    std_shape, std_rate, n_std = _record(fits, g19.INST_STD)
    # long = >= 24 five-minute windows: runs over ~2 h, ~e^(-1/2) of the 4-hour runs: ~600 instances
    assert n == n_std == fits.n_long
    assert n > 500
    # inst mean -> mu (the window factors have mean 1): Gamma(2, 0.01), mean 0.02 NCU. The
    # window noise (CV^2 0.098 / >= 24 windows) lowers the shape to ~1.98; SE ~0.1 at n 600
    assert abs(mean_shape - MODEL.cpu_shape) < 0.3, mean_shape
    assert abs(mean_shape / mean_rate - MODEL.cpu_shape * MODEL.cpu_scale) < 0.002
    # inst std -> mu * sd(U(0.8,1.2) U(0.5,1.5)) = mu * sqrt((1 + 0.4^2/12)(1 + 1/12) - 1)
    # = 0.3127 mu: mean 0.00625 NCU (the avg std would be 0.115 mu = 0.0023), shape ~2
    spread = np.sqrt((1 + 0.4**2 / 12) * (1 + 1 / 12) - 1)
    assert abs(std_shape / std_rate - spread * MODEL.cpu_shape * MODEL.cpu_scale) < 0.0006
    assert abs(std_shape - MODEL.cpu_shape) < 0.35, std_shape


def test_the_priors_read_finished_incarnations_and_long_instances_only(tmp_path: Path) -> None:
    # hand-made rows: FINISH (6) with 10 s and 30 s, a FAIL (5) of 1,000 s, a FINISH still
    # without an execution time (null), one of 0 s (left out: the Gamma needs x > 0)
    times = pl.LazyFrame(
        {
            "terminal_event_type": [6, 6, 5, 6, 6],
            "execution_time_s": [10.0, 30.0, 1_000.0, None, 0.0],
            "schedule_time": [1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000],
            "end_time": [11_000_000, 32_000_000, 1_003_000_000, None, 5_000_000],
        }
    )
    usage = pl.LazyFrame(
        {
            "inst_mean": [0.01, 0.03, 0.5, 0.02],
            "inst_std": [0.001, 0.004, 0.2, 0.002],
            "is_long": [True, True, False, True],
        }
    )
    fits = g19.google2019_fits(times, usage, n_bootstrap=5)
    by_name = {r.name: r for r in fits.records}
    assert fits.n_long == 3
    assert by_name[g19.EXECUTION].n == 2
    assert by_name[g19.EXECUTION].values["n_dropped_nonpositive"] == 1
    shape, _, scale = stats.gamma.fit([10.0, 30.0], floc=0)
    assert by_name[g19.EXECUTION].parameters["shape"].value == pytest.approx(shape, rel=1e-6)
    assert by_name[g19.EXECUTION].parameters["rate"].value == pytest.approx(1 / scale, rel=1e-6)
    # the long instances' means: 0.01, 0.03, 0.02 (not the short one's 0.5): sample mean 0.02
    mean = by_name[g19.INST_MEAN]
    assert mean.parameters["shape"].value / mean.parameters["rate"].value == pytest.approx(0.02)
    assert mean.parameters["rate"].unit == "1/NCU"
    std = by_name[g19.INST_STD]
    assert std.parameters["shape"].value / std.parameters["rate"].value == pytest.approx(0.007 / 3)
    # the window: first SCHEDULE 1 s, last end 32 s of the FINISHed runs with a time (hours)
    window = g19.fitted_window_hours(times)
    assert window == pytest.approx((1 / 3600, 32 / 3600))
    summary = g19.google2019_summary(fits, times, tmp_path)
    assert summary["inputs"]["terminal_event_types"] == {"5": 1, "6": 4}
    assert summary["shortfalls"] == []
    # the index leads with the execution prior's shape, over its 2 positive times
    assert summary["headline"] == {
        "key": "g2019_instance_execution_time_shape",
        "condition": "MLE with location 0 over the execution times of 2 FINISHed incarnations",
    }


def test_nothing_to_fit_is_said_per_prior_with_the_lake_tables(tmp_path: Path) -> None:
    times = pl.LazyFrame(
        {"terminal_event_type": [], "execution_time_s": [], "schedule_time": [], "end_time": []},
        schema={
            "terminal_event_type": pl.Int64,
            "execution_time_s": pl.Float64,
            "schedule_time": pl.Int64,
            "end_time": pl.Int64,
        },
    )
    usage = pl.LazyFrame(
        {"inst_mean": [], "inst_std": [], "is_long": []},
        schema={"inst_mean": pl.Float64, "inst_std": pl.Float64, "is_long": pl.Boolean},
    )
    fits = g19.google2019_fits(times, usage, n_bootstrap=5)
    assert fits.records == ()
    assert [name for name, _ in fits.skipped] == [g19.EXECUTION, g19.INST_MEAN, g19.INST_STD]
    texts = [s.text for s in g19.google2019_shortfalls(fits, tmp_path)]
    assert texts[0] == (
        "fit g2019_instance_execution_time: needs 2 distinct positive values; found 0 FINISHed "
        "incarnations with an execution time (instance_events: 0 rows ingested, no "
        "instance_events/instance_events-NNNNNNNNNNNN.json.gz file was given)"
    )
    assert texts[1].startswith("fit g2019_instance_inst_mean: needs 2 distinct positive values; ")
    assert "found 0 long instances (instance_usage: 0 rows ingested" in texts[1]
    assert g19.google2019_summary(fits, times, tmp_path)["inputs"]["window_hours"] is None
