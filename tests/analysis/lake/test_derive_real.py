"""Derived tables on the real excerpts (``../shared/data/real``; Zhu et al. §2.2).

task_events parts 0, 2 and 3, the task_usage sample, job_events and machine_events go through the
ingest flow and the derive flow, as a user's would. The paper's two findings must show, and the
transition counts must equal an independent computation written differently: Polars ``shift``
over the same (time, file, row) order, on the raw CSVs read directly.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tracelab.analysis.lake import derive
from tracelab.analysis.lake.schemas import GOOGLE_2011, SOURCE_FILE, SOURCE_ROW
from tracelab.flows.derive import DeriveRun, run_derive
from tracelab.flows.ingest import run_ingest
from tracelab.flows.settings import Settings

PARTS = ("part-00000-of-00500", "part-00002-of-00500", "part-00003-of-00500")

pytestmark = [pytest.mark.real_data, pytest.mark.slow]


def real_task_events(real_dir: Path, parts: tuple[str, ...] = PARTS) -> pl.DataFrame:
    """The real task_events parts, typed by the registry, with source file and 1-based row."""
    table = GOOGLE_2011["task_events"]
    schema = table.polars_schema()
    # booleans are 0/1 in the files
    read_schema = {k: (pl.Int64() if v == pl.Boolean() else v) for k, v in schema.items()}
    frames = []
    for part in parts:
        path = real_dir / "google-clusterdata-2011-2" / "task_events" / f"{part}.csv.gz"
        df = pl.read_csv(
            path,
            has_header=False,
            new_columns=table.column_names,
            schema=read_schema,
            row_index_name=SOURCE_ROW,
            row_index_offset=1,
        )
        frames.append(
            df.with_columns(
                pl.lit(f"task_events/{path.name}").alias(SOURCE_FILE),
                pl.col(SOURCE_ROW).cast(pl.Int64()),
                *(pl.col(c).cast(pl.Boolean()) for c, t in schema.items() if t == pl.Boolean()),
            ).select(*table.column_names, SOURCE_FILE, SOURCE_ROW)
        )
    return pl.concat(frames)


@pytest.fixture(scope="module")
def events(real_dir: Path) -> pl.DataFrame:
    return real_task_events(real_dir)


def _raw_root(real_dir: Path, root: Path) -> Path:
    """A published-layout raw root of symlinks to the chosen real files (nothing copied)."""
    src = real_dir / "google-clusterdata-2011-2"
    links = {
        **{f"task_events/{p}.csv.gz": f"task_events/{p}.csv.gz" for p in PARTS},
        "job_events/part-00000-of-00500.csv.gz": "job_events/part-00000-of-00500.csv.gz",
        "machine_events/part-00000-of-00001.csv.gz": "machine_events/part-00000-of-00001.csv.gz",
        # the sample's added header line becomes ingest's one reject
        "task_usage/part-00000-of-00500.csv": "task_usage/google2011_task_usage_sample.csv",
    }
    for link, target in links.items():
        (root / link).parent.mkdir(parents=True, exist_ok=True)
        (root / link).symlink_to(src / target)
    return root


@pytest.fixture(scope="module")
def derived(
    prefect_harness: None, real_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, DeriveRun]:
    data = tmp_path_factory.mktemp("real")
    raw = _raw_root(real_dir, data / "raw" / "google-2011")
    summary = run_ingest("google-2011", raw, data / "lake")
    assert not summary.failed
    settings = Settings(data_dir=data, duckdb_memory_limit="1GB", duckdb_threads=2)
    run = run_derive(settings=settings, trace="google-2011")
    return data / "derived" / "google-2011", run


def _table(derived: tuple[Path, DeriveRun], name: str) -> pl.DataFrame:
    return pl.read_parquet(derived[0] / f"{name}.parquet")


def _counts(derived: tuple[Path, DeriveRun]) -> pl.DataFrame:
    return _table(derived, "agg_transition_counts")


def test_part_0_is_the_published_file(real_dir: Path) -> None:
    events = real_task_events(real_dir, PARTS[:1])
    # docs/methods.md §0.3: facts checked on part 0
    assert events.height == 450_146
    counts = dict(events.group_by("event_type").len().iter_rows())
    assert counts == {0: 201_491, 1: 189_994, 2: 4_338, 3: 581, 4: 43_237, 5: 10_505}


def test_paper_findings_are_visible(derived: tuple[Path, DeriveRun]) -> None:
    counts = _counts(derived)

    def n(prev: int, event: int) -> int:
        hit = counts.filter((pl.col("prev_event_type") == prev) & (pl.col("event_type") == event))
        return int(hit["n"].sum())

    # Zhu et al. §2.2: a submitted task can be evicted straight from pending ...
    assert n(0, 2) > 0
    # ... and a SUBMIT never directly follows a SUBMIT
    assert n(0, 0) == 0
    pending_evict = counts.filter((pl.col("prev_event_type") == 0) & (pl.col("event_type") == 2))
    assert pending_evict["allowed_by_documented_graph"].to_list() == [False]


def test_counts_equal_a_polars_shift(events: pl.DataFrame, derived: tuple[Path, DeriveRun]) -> None:
    pairs = (
        events.sort("job_id", "task_index", "time", SOURCE_FILE, SOURCE_ROW)
        .with_columns(
            pl.col("event_type").shift(1).over("job_id", "task_index").alias("prev_event_type"),
            (pl.col("priority") >= 9).alias("production"),
        )
        .group_by("prev_event_type", "event_type")
        .agg(pl.len().alias("n"), pl.col("production").sum().alias("n_production"))
        .sort("prev_event_type", "event_type", nulls_last=False)
    )
    ours = (
        _counts(derived)
        .select("prev_event_type", "event_type", "n", "n_production")
        .sort("prev_event_type", "event_type", nulls_last=False)
    )
    assert ours.height == pairs.height
    assert ours.rows() == pairs.cast({"n": pl.Int64(), "n_production": pl.Int64()}).rows()
    assert int(ours["n"].sum()) == events.height


def test_transition_rows_are_in_file_order_within_a_microsecond(
    derived: tuple[Path, DeriveRun],
) -> None:
    rows = _table(derived, "fct_task_transitions").select(
        "job_id", "task_index", "event_seq", "time", SOURCE_FILE, SOURCE_ROW
    )
    by_key = rows.sort("job_id", "task_index", "time", SOURCE_FILE, SOURCE_ROW)
    rank = pl.int_range(1, pl.len() + 1, dtype=pl.Int64()).over("job_id", "task_index")
    expected = by_key.select(rank.alias("event_seq"))["event_seq"]
    assert by_key["event_seq"].to_list() == expected.to_list()


def test_every_table_is_derived_and_every_check_holds(derived: tuple[Path, DeriveRun]) -> None:
    out, run = derived
    names = derive.derived_table_names("google-2011")
    assert sorted(p.stem for p in out.glob("*.parquet")) == names
    assert [t.name for t in run.tables] == derive.dependency_order(
        derive.table_dependencies("google-2011")
    )
    assert run.checks
    assert all(c.holds for c in run.checks)
    rows = {t.name: t.rows for t in run.tables}
    assert rows["fct_task_transitions"] == 450_146 + 160_642 + 115_400
    # the sample covers one usage window (PROVENANCE.md): 10,000 tasks, none of them long
    stats = _table(derived, "fct_task_usage_stats")
    assert 0 < stats.height < 10_000
    assert stats["n_windows"].max() == 1
    assert rows["fct_task_usage_histograms"] == 0
    usage = _table(derived, "agg_usage_by_priority").filter(pl.col("window_index") == 0)
    assert int(usage["usage_records"].sum()) == 10_000
