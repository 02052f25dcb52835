"""The notebooks of docs/notebooks/ run top to bottom in a real kernel, on a tiny run's data."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from cli_helpers import TinyPipeline
from nbclient import NotebookClient
from repo_paths import REPO

import tracelab

NOTEBOOKS = sorted((REPO / "docs" / "notebooks").glob("*.ipynb"))


def test_notebooks_are_valid_and_stored_without_outputs() -> None:
    assert [p.name for p in NOTEBOOKS] == ["quickstart.ipynb"]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        cells = [c for c in nb.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in cells), path.name


@pytest.mark.slow
def test_quickstart_runs_on_a_data_dir(
    tiny_pipeline: TinyPipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = nbformat.read(REPO / "docs" / "notebooks" / "quickstart.ipynb", as_version=4)
    monkeypatch.setenv("TRACELAB_DATA", str(tiny_pipeline.data))
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # a cell that raises fails the test with its traceback
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    printed = [o["text"] for o in outputs if o["output_type"] == "stream" and o["name"] == "stdout"]
    # the tiny run generates every trace
    traces = ("google-2011", "azure-2017", "alibaba-2018", "google-2019", "azure-2019")
    assert printed[0] == f"{tracelab.__version__} {traces}\n"
    assert printed[1].startswith("sample mean ")
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 3  # the two report figures and the prior's sample
