"""Incremental stage state checks its outputs, not only its inputs."""

from __future__ import annotations

from pathlib import Path

from tracelab.analysis.common.fingerprints import (
    StageState,
    outputs_intact,
    read_stage_state,
    stage_output_digests,
    write_stage_state,
)


def _derived(tmp_path: Path) -> Path:
    out = tmp_path / "derived" / "google-2011"
    out.mkdir(parents=True)
    (out / "fct_task_times.parquet").write_bytes(b"times")
    (out / "agg_queue_length.parquet").write_bytes(b"queue")
    return out


def _state(out: Path, tmp_path: Path) -> StageState:
    state = StageState(
        "derive",
        "google-2011",
        "fp",
        "2026-11-22T00:00:00Z",
        stage_output_digests(out.parent, [out]),
    )
    path = tmp_path / "state" / "derive.json"
    write_stage_state(path, state)
    read = read_stage_state(path)
    assert read == state  # the outputs survive the JSON round trip
    return read


def test_unchanged_outputs_are_intact(tmp_path: Path) -> None:
    out = _derived(tmp_path)
    state = _state(out, tmp_path)
    (out / ".agg_x.parquet.partial").write_bytes(b"a killed writer's leftover")
    assert outputs_intact(state, out.parent, [out])


def test_a_deleted_derived_file_is_noticed(tmp_path: Path) -> None:
    # before: the folder was not empty, so the stage said "unchanged" with a table missing
    out = _derived(tmp_path)
    state = _state(out, tmp_path)
    (out / "agg_queue_length.parquet").unlink()
    assert not outputs_intact(state, out.parent, [out])


def test_a_replaced_or_added_file_is_noticed(tmp_path: Path) -> None:
    out = _derived(tmp_path)
    state = _state(out, tmp_path)
    (out / "agg_queue_length.parquet").write_bytes(b"QUEUE")  # same size, other bytes
    assert not outputs_intact(state, out.parent, [out])
    (out / "agg_queue_length.parquet").write_bytes(b"queue")
    assert outputs_intact(state, out.parent, [out])
    (out / "stray.parquet").write_bytes(b"")
    assert not outputs_intact(state, out.parent, [out])


def test_a_single_file_output_and_an_old_state(tmp_path: Path) -> None:
    params = tmp_path / "params.json"
    params.write_text("{}", encoding="utf-8")
    state = StageState("export", "google-2011", "fp", "t", stage_output_digests(tmp_path, [params]))
    assert outputs_intact(state, tmp_path, [params])
    params.unlink()
    assert not outputs_intact(state, tmp_path, [params])
    # a state written before outputs were recorded never counts as intact: the stage reruns once
    assert not outputs_intact(StageState("export", "google-2011", "fp", "t"), tmp_path, [params])
