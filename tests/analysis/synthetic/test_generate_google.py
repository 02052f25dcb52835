"""The google-2011 generator: exact format, life-cycle graph, usage, families, truth."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy.stats import ks_2samp, spearmanr
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.schemas import (
    GOOGLE_2011,
    TIME_AFTER_WINDOW_US,
    USAGE_WINDOW_US,
    WINDOW_START_US,
)
from tracelab.analysis.synthetic import generate_trace

SEED = 11
# event codes (docs/methods.md §0.1)
SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPD_P, UPD_R = range(9)
PENDING = {SUBMIT, UPD_P}
RUNNING = {SCHEDULE, UPD_R}
DEAD = {EVICT, FAIL, FINISH, KILL, LOST}
#: published text of a field per kind: integers without decimals, plain decimals, 0/1
FORMATS = {"int": r"^-?[0-9]+$", "float": r"^[0-9]+(\.[0-9]+)?$", "bool": r"^[01]$"}
#: the documented graph (docs/methods.md §1.1), state of the previous event -> allowed next events
ALLOWED = {
    "start": {SUBMIT},
    "pending": {SCHEDULE, FAIL, KILL, LOST, UPD_P},
    "running": {EVICT, FAIL, FINISH, KILL, LOST, UPD_R},
    "dead": {SUBMIT},
}


def _state(event: int | None) -> str:
    if event is None:
        return "start"
    if event in PENDING:
        return "pending"
    if event in RUNNING:
        return "running"
    return "dead"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("g") / "google-2011"
    truth_path = generate_trace("google-2011", out, seed=SEED, scale="tiny")
    assert truth_path == out / "TRUTH.json"
    return out, json.loads(truth_path.read_text())


def read_table(out: Path, name: str) -> pl.DataFrame:
    """All parts of a table, typed by the registry (booleans as 0/1 ints), with file and row."""
    table = GOOGLE_2011[name]
    schema = {
        c.name: pl.Int64() if c.kind in ("int", "bool") else table.polars_schema()[c.name]
        for c in table.columns
    }
    frames = []
    for i, path in enumerate(sorted((out / name).glob("part-*.csv.gz"))):
        df = pl.read_csv(path, has_header=False, schema=schema)
        frames.append(df.with_columns(file=pl.lit(i), row=pl.int_range(pl.len())))
    return pl.concat(frames)


def test_every_file_has_the_registry_columns_and_exact_format(
    trace: tuple[Path, dict[str, Any]],
) -> None:
    out, truth = trace
    for name, table in GOOGLE_2011.items():
        parts = sorted((out / name).glob("*"))
        assert parts, name
        n = len(parts)
        assert [p.name for p in parts] == [f"part-{i:05d}-of-{n:05d}.csv.gz" for i in range(n)]
        assert [f"{name}/{p.name}" for p in parts] == truth["tables"][name]["files"]
        rows = 0
        for part in parts:
            text = gzip.decompress(part.read_bytes()).decode("ascii")
            lines = text.splitlines()
            rows += len(lines)
            widths = {line.count(",") + 1 for line in lines}
            assert widths == {len(table.columns)}, (part, widths)
            raw = pl.read_csv(
                part, has_header=False, infer_schema=False, new_columns=table.column_names
            )
            for col in table.columns:
                field = raw[col.name].drop_nulls()  # empty field = NULL
                if col.mandatory:
                    assert field.len() == raw.height, (part, col.name)
                pattern = FORMATS.get(col.kind)
                if pattern is not None:
                    assert field.str.contains(pattern).all(), (part, col.name)
        assert rows == truth["tables"][name]["rows"]
    for name in ("task_events", "task_usage", "job_events", "task_constraints"):
        assert len(truth["tables"][name]["files"]) == 4


def test_same_seed_gives_identical_bytes_and_another_seed_differs(
    trace: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    out, _ = trace
    again = tmp_path / "again"
    generate_trace("google-2011", again, seed=SEED, scale="tiny")
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for rel in files:
        assert (out / rel).read_bytes() == (again / rel).read_bytes(), rel
    other = tmp_path / "other"
    generate_trace("google-2011", other, seed=SEED + 1, scale="tiny")
    usage = "task_usage/part-00000-of-00004.csv.gz"
    assert (out / usage).read_bytes() != (other / usage).read_bytes()


def test_parts_are_sorted_by_time_and_jobs_stay_in_one_part(
    trace: tuple[Path, dict[str, Any]],
) -> None:
    out, _ = trace
    for name, col in (
        ("task_events", "time"),
        ("task_usage", "start_time"),
        ("job_events", "time"),
    ):
        df = read_table(out, name)
        per_file = df.group_by("file").agg(pl.col(col).diff().min().alias("d"))
        assert (per_file["d"] >= 0).all(), name
    ev = read_table(out, "task_events")
    assert ev.group_by("job_id").agg(pl.col("file").n_unique())["file"].max() == 1
    usage = read_table(out, "task_usage")
    files = ev.select("job_id", "file").unique().rename({"file": "ev_file"})
    joined = usage.select("job_id", "file").unique().join(files, on="job_id", how="left")
    assert (joined["file"] == joined["ev_file"]).all()


def test_life_cycles_follow_the_graph_except_pending_evicts(
    trace: tuple[Path, dict[str, Any]],
) -> None:
    out, truth = trace
    ev = read_table(out, "task_events").sort("job_id", "task_index", "time", "file", "row")
    jobs = ev["job_id"].to_list()
    tasks = ev["task_index"].to_list()
    types = ev["event_type"].to_list()
    machines = ev["machine_id"].to_list()
    seen: dict[tuple[str, int], int] = {}
    bad: list[tuple[int, int, int | None, int]] = []
    prev: int | None = None
    for i, cur in enumerate(types):
        if i == 0 or (jobs[i], tasks[i]) != (jobs[i - 1], tasks[i - 1]):
            prev = None
        state = _state(prev)
        seen[(state, cur)] = seen.get((state, cur), 0) + 1
        if cur not in ALLOWED[state] and not (state == "pending" and cur == EVICT):
            bad.append((jobs[i], tasks[i], prev, cur))
        # machine IDs: NULL while pending, set from SCHEDULE on (pending deaths have none)
        if cur in (SUBMIT, UPD_P) or (state == "pending" and cur in DEAD):
            assert machines[i] is None, (jobs[i], tasks[i], cur)
        elif state != "dead":
            assert machines[i] is not None, (jobs[i], tasks[i], cur)
        prev = cur
    assert bad == []
    special = truth["special_rows"]
    assert seen[("pending", EVICT)] == special["pending_evicts"] > 0
    # the documented anomaly-free rest of the graph is exercised
    for pair in (("dead", SUBMIT), ("pending", FAIL), ("pending", KILL), ("running", LOST)):
        assert seen.get((pair[0], pair[1]), 0) > 0, pair
    for pair in (("pending", UPD_P), ("running", UPD_R), ("running", EVICT)):
        assert seen.get(pair, 0) > 0, pair
    # restarts after FINISH and resubmissions after EVICT/FAIL/KILL (counted from the files)
    prev_type = ev.with_columns(
        prev=pl.col("event_type").shift(1).over("job_id", "task_index")
    ).filter(pl.col("event_type") == SUBMIT)
    restarts = prev_type.filter(pl.col("prev") == FINISH).height
    resubmits = prev_type.filter(pl.col("prev").is_in([EVICT, FAIL, KILL])).height
    assert restarts == special["finish_restarts"] > 0
    assert resubmits == special["resubmissions_after_evict_fail_kill"] > 0
    assert prev_type.filter(pl.col("prev") == SUBMIT).height == 0


def test_special_times_missing_info_priorities_and_requests(
    trace: tuple[Path, dict[str, Any]],
) -> None:
    out, truth = trace
    ev = read_table(out, "task_events")
    special = truth["special_rows"]
    assert ev.filter(pl.col("time") == 0).height == special["task_events_time_zero"] > 0
    after = ev.filter(pl.col("time") == TIME_AFTER_WINDOW_US).height
    assert after == special["task_events_after_window"] > 0
    missing = ev.filter(pl.col("missing_info").is_not_null())
    assert missing.height == special["task_events_missing_info"] > 0
    assert missing["cpu_request"].null_count() == missing.height
    assert set(missing["missing_info"].unique().to_list()) <= {0, 1, 2}
    # same-microsecond SUBMIT + SCHEDULE, and time-0 tasks that run into the window
    pairs = ev.sort("job_id", "task_index", "time", "file", "row").with_columns(
        prev_t=pl.col("time").shift(1).over("job_id", "task_index"),
        prev_e=pl.col("event_type").shift(1).over("job_id", "task_index"),
    )
    same = pairs.filter(
        (pl.col("event_type") == SCHEDULE)
        & (pl.col("prev_e") == SUBMIT)
        & (pl.col("prev_t") == pl.col("time"))
    )
    assert same.height == special["same_microsecond_submit_schedule"]
    # the real task_events parts 2-3 never SCHEDULE in the SUBMIT's microsecond inside the window;
    # tasks submitted before it show both at time 0
    assert same.filter(pl.col("time") > 0).height == 0
    assert same.filter(pl.col("time") == 0).height > 0
    pri = ev["priority"]
    assert pri.min() == 0
    assert pri.max() == 11
    assert 0.02 < (pri >= 9).mean() < 0.5  # type: ignore[operator]
    req = ev["cpu_request"].drop_nulls()
    assert req.min() > 0  # type: ignore[operator]
    assert req.max() <= 1  # type: ignore[operator]
    assert ev["memory_request"].drop_nulls().max() <= 1  # type: ignore[operator]
    counts = ev["event_type"].value_counts()
    got = {str(t): n for t, n in counts.iter_rows()}
    assert got == truth["event_type_counts"]["task_events"]
    assert set(got) == {str(i) for i in range(9)}


def test_job_events_agree_with_task_events(trace: tuple[Path, dict[str, Any]]) -> None:
    out, truth = trace
    ev = read_table(out, "task_events")
    jobs = read_table(out, "job_events")
    assert jobs.height == truth["tables"]["job_events"]["rows"]
    got = {str(t): n for t, n in jobs["event_type"].value_counts().iter_rows()}
    assert got == truth["event_type_counts"]["job_events"]
    first = ev.group_by("job_id").agg(
        sub=pl.col("time").filter(pl.col("event_type") == SUBMIT).min(),
        sch=pl.col("time").filter(pl.col("event_type") == SCHEDULE).min(),
    )
    js = jobs.group_by("job_id").agg(
        jsub=pl.col("time").filter(pl.col("event_type") == SUBMIT).min(),
        jsch=pl.col("time").filter(pl.col("event_type") == SCHEDULE).min(),
        jend=pl.col("time").filter(pl.col("event_type").is_in(list(DEAD))).max(),
    )
    both = first.join(js, on="job_id", how="full", coalesce=True)
    assert both.height == first.height == js.height
    assert (both["sub"] == both["jsub"]).all()
    sched = both.filter(pl.col("sch").is_not_null())
    assert (sched["sch"] == sched["jsch"]).all()
    assert both.filter(pl.col("sch").is_null())["jsch"].null_count() == both["sch"].null_count()
    last = ev.group_by("job_id").agg(pl.col("time").max().alias("last"))
    ended = js.filter(pl.col("jend").is_not_null()).join(last, on="job_id")
    assert ended.height > 0
    assert (ended["jend"] == ended["last"]).all()


def _runs(ev: pl.DataFrame, window_end: int) -> pl.DataFrame:
    """Every run: its SCHEDULE time and machine, and the first later terminal event (or horizon)."""
    ev = ev.sort("job_id", "task_index", "time", "file", "row").with_columns(
        run=(pl.col("event_type") == SCHEDULE).cast(pl.Int64).cum_sum().over("job_id", "task_index")
    )
    runs = (
        ev.filter(pl.col("run") > 0)
        .group_by("job_id", "task_index", "run")
        .agg(
            start=pl.col("time").filter(pl.col("event_type") == SCHEDULE).first(),
            machine=pl.col("machine_id").filter(pl.col("event_type") == SCHEDULE).first(),
            end=pl.col("time").filter(pl.col("event_type").is_in(list(DEAD))).first(),
        )
    )
    return runs.with_columns(
        end=pl.when(pl.col("end").is_null() | (pl.col("end") == TIME_AFTER_WINDOW_US))
        .then(pl.lit(window_end))
        .otherwise(pl.col("end"))
    )


def test_usage_rows_fall_inside_runs_on_the_schedule_machine(
    trace: tuple[Path, dict[str, Any]],
) -> None:
    out, truth = trace
    usage = read_table(out, "task_usage").with_row_index("uid")
    assert truth["tables"]["task_usage"]["rows"] == usage.height
    assert 50_000 <= usage.height <= 150_000
    assert ((usage["start_time"] - WINDOW_START_US) % USAGE_WINDOW_US == 0).all()
    assert (usage["end_time"] - usage["start_time"] == USAGE_WINDOW_US).all()
    runs = _runs(read_table(out, "task_events"), truth["window_end_us"])
    matched = (
        usage.select("uid", "job_id", "task_index", "machine_id", "start_time", "end_time")
        .join(
            runs,
            left_on=["job_id", "task_index", "machine_id"],
            right_on=["job_id", "task_index", "machine"],
        )
        .filter((pl.col("start_time") >= pl.col("start")) & (pl.col("end_time") <= pl.col("end")))
    )
    assert matched["uid"].n_unique() == usage.height
    # windows per task equal the truth; some long-running tasks have hundreds of windows
    tasks = pl.read_parquet(out / truth["tasks_file"])
    per_task = usage.group_by("job_id", "task_index").len()
    joined = tasks.join(per_task, on=["job_id", "task_index"], how="left").with_columns(
        pl.col("len").fill_null(0)
    )
    assert (joined["len"] == joined["n_windows"]).all()
    assert (joined["has_usage"] == (joined["len"] > 0)).all()
    assert joined["n_windows"].max() >= 250  # type: ignore[operator]
    long_ok = joined.filter((pl.col("n_windows") >= 24) & ~pl.col("failed"))
    assert long_ok.height >= 300
    assert truth["tasks"]["long_nonfailed"] == long_ok.height
    assert 1_000 <= tasks.height <= 10_000
    # failed tasks also have usage; some tasks are idle (inst 0 in every window)
    assert truth["special_rows"]["usage_rows_of_failed_tasks"] > 0
    failed_keys = tasks.filter(pl.col("failed") & pl.col("has_usage")).select(
        "job_id", "task_index"
    )
    assert (
        usage.join(failed_keys, on=["job_id", "task_index"]).height
        == (truth["special_rows"]["usage_rows_of_failed_tasks"])
    )
    zero = usage.group_by("job_id", "task_index").agg(pl.col("sampled_cpu_usage").max().alias("m"))
    assert zero.filter(pl.col("m") == 0).height > 0
    for col in ("cycles_per_instruction", "memory_accesses_per_instruction"):
        assert 0 < usage[col].null_count() < 0.1 * usage.height


def test_machines_attributes_and_constraints_are_consistent(
    trace: tuple[Path, dict[str, Any]],
) -> None:
    out, truth = trace
    me = read_table(out, "machine_events")
    got = {str(t): n for t, n in me["event_type"].value_counts().iter_rows()}
    assert got == truth["event_type_counts"]["machine_events"]
    assert set(got) == {"0", "1", "2"}
    # tasks only run on machines ADDed at time 0 and never removed
    removed = set(me.filter(pl.col("event_type") == 1)["machine_id"].to_list())
    at_zero = set(
        me.filter((pl.col("time") == 0) & (pl.col("event_type") == 0))["machine_id"].to_list()
    )
    used = set(read_table(out, "task_events")["machine_id"].drop_nulls().to_list())
    used |= set(read_table(out, "task_usage")["machine_id"].to_list())
    assert used <= at_zero - removed
    ma = read_table(out, "machine_attributes")
    assert set(ma["machine_id"].to_list()) <= set(me["machine_id"].to_list())
    tc = read_table(out, "task_constraints")
    assert tc.height > 0
    assert set(tc["attribute_name"].to_list()) <= set(ma["attribute_name"].to_list())
    values = set(ma["attribute_value"].drop_nulls().to_list())
    assert set(tc["attribute_value"].drop_nulls().to_list()) <= values
    first = (
        read_table(out, "task_events")
        .group_by("job_id", "task_index")
        .agg(pl.col("time").min().alias("first"))
    )
    j = tc.join(first, on=["job_id", "task_index"], how="left")
    assert j["first"].null_count() == 0
    assert (j["time"] == j["first"]).all()


def _long_usage(out: Path, truth: dict[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame]:
    usage = read_table(out, "task_usage").select(
        "job_id", "task_index", "start_time", "cpu_rate", "sampled_cpu_usage"
    )
    tasks = pl.read_parquet(out / truth["tasks_file"]).filter(
        (pl.col("n_windows") >= 24) & ~pl.col("failed") & ~pl.col("all_zero_inst")
    )
    long = usage.join(tasks, on=["job_id", "task_index"]).sort("job_id", "task_index", "start_time")
    return long, tasks


def test_kmeans_on_inst_histograms_recovers_the_families(
    trace: tuple[Path, dict[str, Any]],
) -> None:
    out, truth = trace
    long, tasks = _long_usage(out, truth)
    assert tasks.height >= 250
    key = (
        long.select(pl.struct("job_id", "task_index").rank("dense").alias("k"))["k"].to_numpy() - 1
    )
    inst = long["sampled_cpu_usage"].to_numpy()
    bins = np.minimum((inst * 100).astype(np.int64), 99)
    hist = np.zeros((int(key.max()) + 1, 100))
    np.add.at(hist, (key, bins), 1.0)
    hist /= hist.sum(axis=1, keepdims=True)
    fam = (
        long.group_by(pl.struct("job_id", "task_index").rank("dense").alias("k"))
        .agg(pl.col("family").first())
        .sort("k")["family"]
        .to_list()
    )
    n_families = len(truth["families"])
    assert n_families == 5
    assert set(fam) == set(truth["families"])
    labels = KMeans(n_clusters=n_families, n_init=10, random_state=0).fit_predict(hist)
    assert adjusted_rand_score(fam, labels) >= 0.8


def test_avg_tracks_inst_mean_with_smaller_std_and_truth_moments_hold(
    trace: tuple[Path, dict[str, Any]],
) -> None:
    out, truth = trace
    long, _ = _long_usage(out, truth)
    per_task = long.group_by("job_id", "task_index").agg(
        pl.col("family").first(),
        pl.col("sampled_cpu_usage").mean().alias("inst_mean"),
        pl.col("sampled_cpu_usage").std().alias("inst_std"),
        pl.col("cpu_rate").mean().alias("avg_mean"),
        pl.col("cpu_rate").std().alias("avg_std"),
        pl.col("true_inst_mean").first(),
        pl.col("true_inst_std").first(),
        pl.col("true_avg_std").first(),
    )
    diff = (per_task["avg_mean"] - per_task["inst_mean"]).abs()
    assert diff.median() < 0.01  # type: ignore[operator]
    by_family = per_task.group_by("family").agg(pl.col("inst_std").mean(), pl.col("avg_std").mean())
    assert by_family.height == 5
    assert (by_family["inst_std"] > by_family["avg_std"]).all()
    # the truth file holds the generating moments: sample values scatter around them
    err = (per_task["inst_mean"] - per_task["true_inst_mean"]).abs() / (
        per_task["true_inst_std"] + 1e-3
    )
    assert err.median() < 0.3  # type: ignore[operator]
    ratio = per_task["avg_std"] / per_task["true_avg_std"]
    assert 0.85 < ratio.median() < 1.15  # type: ignore[operator]
    # TRUTH regression = least squares over exactly this task set
    x = per_task["true_inst_mean"].to_numpy()
    y = per_task["true_inst_std"].to_numpy()
    slope, intercept = np.polyfit(x, y, 1)
    reg = truth["regression"]["inst"]
    assert reg["n"] == per_task.height
    assert reg["slope"] == pytest.approx(slope, rel=1e-6)
    assert reg["intercept"] == pytest.approx(intercept, rel=1e-6, abs=1e-9)


def test_shifting_tasks_are_detected_by_ks_at_their_window(
    trace: tuple[Path, dict[str, Any]],
) -> None:
    out, truth = trace
    long, tasks = _long_usage(out, truth)
    shifted = tasks.filter(pl.col("shifts"))
    # every long non-idle task may shift (TRUTH shift.min_windows <= 24) with the documented
    # probability: the realised share is binomial around it (4 standard errors)
    p = truth["shift"]["probability"]
    assert truth["shift"]["min_windows"] <= 24
    share = shifted.height / tasks.height
    assert abs(share - p) < 4 * np.sqrt(p * (1 - p) / tasks.height), (share, p)
    rejected, stable_rejected, n_stable = 0, 0, 0
    for _key, grp in long.group_by("job_id", "task_index"):
        inst = grp.sort("start_time")["sampled_cpu_usage"].to_numpy()
        sw = grp["shift_window"][0]
        if sw is not None:
            assert sw >= 12
            assert inst.size - sw >= 12
            p = ks_2samp(inst[sw - 12 : sw], inst[sw : sw + 12]).pvalue
            rejected += p < 0.05
        elif inst.size >= 48:
            n_stable += 1
            stable_rejected += ks_2samp(inst[:12], inst[-12:]).pvalue < 0.05
    assert rejected >= 0.95 * shifted.height
    assert n_stable > 50
    assert stable_rejected <= 0.15 * n_stable


PRODUCTION = 9  # lowest production priority (Zhu et al. §4.1)


def test_cpu_requests_follow_usage_and_production_uses_a_fraction_of_them(
    trace: tuple[Path, dict[str, Any]],
) -> None:
    """Zhu et al. §4.1 / Figure 9: requested CPU exceeds used CPU for production tasks.

    The share used is time-weighted over the usage windows: each window covers 300 s, so the
    sum of ``cpu_rate`` over a class's windows against the sum of the request in force at each
    window's start (the latest SCHEDULE / UPDATE_RUNNING of that task) is used CPU-time over
    requested CPU-time while the tasks run. Windows whose request is NULL (missing info) drop.
    """
    out, truth = trace
    ev = read_table(out, "task_events")
    running = (
        ev.filter(pl.col("event_type").is_in([SCHEDULE, UPD_R]))
        .select("job_id", "task_index", "time", "priority", "cpu_request")
        .sort("time")
    )
    usage = (
        read_table(out, "task_usage")
        .select("job_id", "task_index", "start_time", "cpu_rate")
        .sort("start_time")
        .join_asof(
            running,
            left_on="start_time",
            right_on="time",
            by=["job_id", "task_index"],
            strategy="backward",
            check_sortedness=False,  # both sides are sorted by time just above
        )
    )
    assert usage["priority"].null_count() == 0  # every window lies inside a run
    usage = usage.filter(pl.col("cpu_request").is_not_null())
    share = usage.group_by(pl.col("priority") >= PRODUCTION).agg(
        pl.col("cpu_rate").sum() / pl.col("cpu_request").sum()
    )
    prod = share.filter(pl.col("priority"))["cpu_rate"].item()
    other = share.filter(~pl.col("priority"))["cpu_rate"].item()
    overall = usage["cpu_rate"].sum() / usage["cpu_request"].sum()
    assert prod < 1
    assert overall < 1
    # with request = true mean x factor, the share used is ~1 / E[factor] of the class: within
    # [1/3, 1/1.3] for production and [1/1.5, 1/0.7] for the rest, whatever the mix of tasks
    model = truth["cpu_request"]
    assert model["production_priority"] == PRODUCTION
    for got, name in ((prod, "production"), (other, "non_production")):
        lo, hi = model["overcommit"][name]["low"], model["overcommit"][name]["high"]
        assert 1 / hi < got < 1 / lo, (name, got)
        # and it agrees with the truth (true means and requests over the same windows)
        assert got == pytest.approx(model["usage_windows"][name]["used_over_requested"], rel=0.02)
    assert prod < other
    bounds = {k: (v["low"], v["high"]) for k, v in model["overcommit"].items()}
    assert bounds == {"production": (1.3, 3.0), "non_production": (0.7, 1.5)}

    # every request on every event of a task: its true mean cpu_rate x a factor in the class
    # bounds (rounded up to 6 decimals), so a production request is never below the inst mean
    tasks = pl.read_parquet(out / truth["tasks_file"])
    req = ev.filter(pl.col("cpu_request").is_not_null()).join(
        tasks.select("job_id", "task_index", "true_inst_mean", "true_avg_mean", "cpu_request"),
        on=["job_id", "task_index"],
        suffix="_truth",
    )
    assert req.height == ev["cpu_request"].drop_nulls().len()
    prod_req = req.filter(pl.col("priority") >= PRODUCTION)
    assert prod_req.height > 1_000
    assert (prod_req["cpu_request"] >= prod_req["true_inst_mean"]).all()
    for is_prod, lo, hi in ((True, 1.3, 3.0), (False, 0.7, 1.5)):
        part = req.filter((pl.col("priority") >= PRODUCTION) == is_prod)
        mean = part["true_avg_mean"]
        # capped at 1 (the largest machine): a few high-usage tasks get a smaller factor
        assert (part["cpu_request"] >= np.minimum(lo * mean - 1e-12, 1.0)).all()
        assert (part["cpu_request"] <= np.minimum(hi * mean + 1e-6, 1.0)).all()
    # the truth's per-task request is the one on each incarnation's SUBMIT
    submits = req.filter(pl.col("event_type") == SUBMIT)
    assert (submits["cpu_request"] == submits["cpu_request_truth"]).all()
    # requests follow usage across tasks: bigger users request more (rank correlation); a
    # request drawn independently of usage gives ~0
    per_task = (
        usage.filter(pl.col("priority") >= PRODUCTION)
        .group_by("job_id", "task_index")
        .agg(pl.col("cpu_rate").mean(), pl.col("cpu_request").mean())
    )
    assert per_task.height > 100
    rho = spearmanr(per_task["cpu_rate"], per_task["cpu_request"]).statistic
    assert rho > 0.9


def test_unknown_trace_or_scale_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TracelabError, match="unknown trace"):
        generate_trace("google-2099", tmp_path / "x")
    with pytest.raises(TracelabError, match=r"unknown scale 'huge'.*tiny"):
        generate_trace("google-2011", tmp_path / "x", scale="huge")


def test_target_mb_keeps_adding_batches(tmp_path: Path) -> None:
    truth = json.loads(
        generate_trace(
            "google-2011", tmp_path / "t", seed=2, scale="tiny", target_mb=12
        ).read_text()
    )
    raw = sum(t["uncompressed_bytes"] for t in truth["tables"].values())
    assert raw >= 12_000_000
    assert truth["batches"] >= 2
    n = truth["batches"]
    assert truth["tables"]["task_usage"]["files"][-1].endswith(f"-of-{n:05d}.csv.gz")
    actual = sum(len(gzip.decompress(p.read_bytes())) for p in (tmp_path / "t").rglob("*.csv.gz"))
    assert actual == raw
    # no temporary or pending part is left behind
    assert not [p for p in (tmp_path / "t").rglob("_*")]


def _decompressed_parts(folder: Path) -> list[bytes]:
    return [gzip.decompress(p.read_bytes()) for p in sorted(folder.glob("part-*.csv.gz"))]


def test_part_mb_groups_consecutive_batches_into_bigger_parts(tmp_path: Path) -> None:
    per_batch = tmp_path / "per_batch"
    generate_trace("google-2011", per_batch, seed=3, scale="tiny")
    batches = _decompressed_parts(per_batch / "task_usage")
    assert len(batches) == 4  # the tiny scale's four job batches, one part each
    # a limit just above the first batch: the first part closes after its second batch
    limit = len(batches[0]) + 1
    grouped = tmp_path / "grouped"
    truth = json.loads(
        generate_trace(
            "google-2011", grouped, seed=3, scale="tiny", part_mb=limit / 1e6
        ).read_text()
    )
    expected: list[list[int]] = [[]]
    for i in range(len(batches)):
        if sum(len(batches[j]) for j in expected[-1]) >= limit:
            expected.append([])
        expected[-1].append(i)
    assert len(expected) < 4
    assert expected[0] == [0, 1]
    assert truth["batches"] == 4
    assert truth["parts"] == len(expected)
    assert truth["part_mb"] == limit / 1e6
    for name in ("task_usage", "task_events", "job_events", "task_constraints"):
        singles = _decompressed_parts(per_batch / name)
        parts = _decompressed_parts(grouped / name)
        # the same rows in the same order, each part the concatenation of its batches' rows
        assert parts == [b"".join(singles[i] for i in group) for group in expected], name
        n = len(expected)
        assert truth["tables"][name]["files"][-1].endswith(f"-of-{n:05d}.csv.gz")
    assert not [p for p in grouped.rglob("_*")]
    with pytest.raises(TracelabError, match="--part-mb must be positive"):
        generate_trace("google-2011", tmp_path / "x", part_mb=0)
    with pytest.raises(TracelabError, match="--part-mb applies to google-2011"):
        generate_trace("azure-2017", tmp_path / "x", part_mb=10)
