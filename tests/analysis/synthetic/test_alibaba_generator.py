"""The alibaba-2018 generator: the published CSV format, determinism, and its truth.

The format checks are the published files' (PROVENANCE.md of the real samples): headerless, the
schema's field count on every line, whole numbers without decimals, an empty field for NULL.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import polars as pl
import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.analysis.lake.provenance import SYNTHETIC_MARK, gzip_member_name
from tracelab.analysis.lake.schemas import ALIBABA_2018
from tracelab.analysis.synthetic import generate_trace
from tracelab.flows.ingest import run_ingest

TRACE = "alibaba-2018"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    out = tmp_path_factory.mktemp("gen") / TRACE
    truth = json.loads(generate_trace(TRACE, out, seed=7, scale="tiny").read_text())
    return out, truth


@pytest.fixture(scope="module")
def lake(
    sample: tuple[Path, dict[str, object]],
    tmp_path_factory: pytest.TempPathFactory,
    prefect_harness: None,
) -> Path:
    lake = tmp_path_factory.mktemp("lake")
    summary = run_ingest(TRACE, sample[0], lake)
    assert not summary.failed
    return lake / TRACE


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()


def test_every_table_in_the_published_layout_and_format(
    sample: tuple[Path, dict[str, object]],
) -> None:
    out, _ = sample
    for name, table in ALIBABA_2018.items():
        path = out / name / f"{name}.csv.gz"
        assert gzip_member_name(path.read_bytes()[:512]) == SYNTHETIC_MARK
        lines = _lines(path)
        assert lines, name
        assert {line.count(",") for line in lines} == {len(table.columns) - 1}, name
        # no header, no "100.0": every number as the published files write it (a text field
        # such as failure_domain_2 is "17.0" in the real rows, so only numbers are checked)
        assert not any(line.startswith(table.columns[0].name) for line in lines)
        numeric = [i for i, c in enumerate(table.columns) if c.kind in ("int", "float")]
        values = [line.split(",")[i] for line in lines for i in numeric]
        assert not [v for v in values if re.fullmatch(r"-?\d+\.0|.*e.*", v)], name
    task = _lines(out / "batch_task" / "batch_task.csv.gz")
    waiting = [line for line in task if ",Waiting," in line]
    # a Waiting task: no instance_num, times 0, no plan (as the real Waiting rows)
    assert waiting
    assert all(re.fullmatch(r"[^,]+,,j_\d+,\d+,Waiting,0,0,,", w) for w in waiting)


def test_same_seed_same_bytes(sample: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    out, _ = sample
    again = tmp_path / TRACE
    generate_trace(TRACE, again, seed=7, scale="tiny")
    for name in ALIBABA_2018:
        rel = Path(name) / f"{name}.csv.gz"
        assert (again / rel).read_bytes() == (out / rel).read_bytes(), name
    other = tmp_path / "other"
    generate_trace(TRACE, other, seed=8, scale="tiny")
    rel = Path("batch_task") / "batch_task.csv.gz"
    assert (other / rel).read_bytes() != (out / rel).read_bytes()


def test_target_mb_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(TracelabError, match="--target-mb is not supported for alibaba-2018"):
        generate_trace(TRACE, tmp_path / "x", scale="tiny", target_mb=5)


def test_lake_holds_the_truths_rows_and_statuses(
    sample: tuple[Path, dict[str, object]], lake: Path
) -> None:
    _, truth = sample
    manifest = read_manifest(lake)
    assert set(manifest["source"]) == {"synthetic"}
    assert manifest["rows_rejected"].sum() == 0
    tables = truth["tables"]
    assert isinstance(tables, dict)
    for name in ALIBABA_2018:
        assert pl.read_parquet(lake / name).height == tables[name]["rows"], name
    tasks = pl.read_parquet(lake / "batch_task")
    counts = dict(tasks.group_by("status").len().iter_rows())
    assert counts == truth["tasks"]["status_counts"]  # type: ignore[index]
    instances = pl.read_parquet(lake / "batch_instance")
    assert (
        dict(instances.group_by("status").len().iter_rows())
        == (
            truth["instances"]["status_counts"]  # type: ignore[index]
        )
    )
    machines = pl.read_parquet(lake / "machine_meta")
    first = machines.group_by("machine_id").agg(pl.col("time_stamp").min())
    assert first["machine_id"].n_unique() == truth["machines"]["n"]  # type: ignore[index]
    assert (first["time_stamp"] == 0).sum() == truth["machines"]["present_at_start"]  # type: ignore[index]


def test_usage_follows_the_models_truth(sample: tuple[Path, dict[str, object]], lake: Path) -> None:
    _, truth = sample
    usage = pl.read_parquet(lake / "container_usage")
    per_container = usage.group_by("container_id").agg(pl.col("cpu_util_percent").mean() / 100)
    # each container's mean over ~700 samples is its u (noise sd 5 points, little clipping):
    # the mean over containers is the truth's mean of u within 0.02 (a mean of the limit, or
    # of cores instead of percent, is off by far more)
    want = truth["containers"]["mean_util_share"]  # type: ignore[index]
    assert abs(per_container["cpu_util_percent"].mean() - want) < 0.02  # type: ignore[operator]
    instances = pl.read_parquet(lake / "batch_instance").join(
        pl.read_parquet(lake / "batch_task").select("job_name", "task_name", "plan_cpu"),
        on=["job_name", "task_name"],
    )
    ratio = (instances["cpu_avg"] / instances["plan_cpu"]).mean()
    # Beta(2, 3) has mean 0.4 and sd 0.2: over > 1,000 instances the mean is within 0.03
    assert instances.height > 1_000
    assert abs(ratio - 0.4) < 0.03  # type: ignore[operator]
    assert (instances["cpu_max"] >= instances["cpu_avg"] - 0.01).all()
