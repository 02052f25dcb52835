"""Validation at the edge and leftovers of kills."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.safety import checked_run_id
from tracelab.flows.cli import main
from tracelab.flows.settings import Settings, settings_from_env
from tracelab.reports.site import build_site

T0 = datetime(2026, 11, 22, 16, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    "run_id", ["../../../x", "..", "a/b", ".hidden", "", "x" * 65, "a\nb", "/abs", "r..1"]
)
def test_unsafe_run_ids_are_refused_in_one_line(run_id: str) -> None:
    with pytest.raises(TracelabError, match="is not a valid run id") as caught:
        checked_run_id(run_id)
    assert "\n" not in str(caught.value).replace(repr(run_id), "")


@pytest.mark.parametrize("run_id", ["20261122T163000Z", "20261122T163000Z-2", "nightly_v1.2"])
def test_safe_run_ids_pass(run_id: str) -> None:
    assert checked_run_id(run_id) == run_id


def test_report_run_id_cannot_write_outside_the_data_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with pytest.raises(TracelabError, match="is not a valid run id"):
        build_site(data, specs=[], run_id="../../../escaped", now=T0)
    assert not list(tmp_path.rglob("escaped*"))


def test_a_killed_builds_temp_folder_is_cleaned_by_the_next_build(tmp_path: Path) -> None:
    runs = tmp_path / "site" / "runs"
    leftover = runs / ".20261122T000000Z.tmp"
    (leftover / "sub").mkdir(parents=True)
    (leftover / "sub" / "page.html").write_text("half", encoding="utf-8")
    build = build_site(tmp_path, specs=[], now=T0, strict=True)
    assert not leftover.exists()
    assert sorted(p.name for p in runs.iterdir()) == [build.run_id]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TRACELAB_DUCKDB_THREADS", "-2"),
        ("TRACELAB_DUCKDB_THREADS", "two"),
        ("TRACELAB_WORKERS", "1e9"),
        ("TRACELAB_WORKERS", "99999999"),
        ("TRACELAB_DUCKDB_MEMORY", "lots"),
        ("TRACELAB_DUCKDB_MEMORY", "8GB; drop"),
        ("TRACELAB_DASK_ADDRESS", "tcp://host:port/../x y"),
        ("TRACELAB_DATA", ""),
        ("TRACELAB_DATA", "a\nb"),
    ],
)
def test_bad_environment_variables_are_one_line_errors(name: str, value: str) -> None:
    # before: int() raised a ValueError traceback, or the value went through unchecked
    with pytest.raises(TracelabError, match=f"environment variable {name}=") as caught:
        settings_from_env({name: value})
    assert "\n" not in str(caught.value).replace(repr(value), "")


def test_good_environment_variables_are_read() -> None:
    env = {
        "TRACELAB_DATA": "/srv/data",
        "TRACELAB_DUCKDB_THREADS": "2",
        "TRACELAB_DUCKDB_MEMORY": "512MiB",
        "TRACELAB_DASK_ADDRESS": "tcp://10.0.0.5:8786",
        "TRACELAB_WORKERS": "0",
    }
    settings = settings_from_env(env)
    assert settings.data_dir == Path("/srv/data")
    assert (settings.duckdb_threads, settings.duckdb_memory_limit) == (2, "512MiB")
    assert settings.dask_address == "tcp://10.0.0.5:8786"
    assert settings_from_env({}) == Settings()


def test_report_command_refuses_a_traversing_run_id_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "deep" / "data"
    data.mkdir(parents=True)  # a missing data directory is refused before the run id is read
    assert main(["report", "--data", str(data), "--run-id", "../../../x"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "is not a valid run id" in err
    assert not (tmp_path / "x").exists()
    assert not list(tmp_path.rglob("x"))
