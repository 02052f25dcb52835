"""Layers run one way (docs/development.md): the import contracts of pyproject.toml hold, and no
module imports itself back through others. Imports inside functions and under TYPE_CHECKING count:
a lazy import still ties the two modules together."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
from repo_paths import REPO


def import_cycle(package: str) -> list[str] | None:
    """One cycle of direct imports between the modules of ``package`` (``[a, b, ..., a]``), or
    None. grimp reads every import statement of a module, wherever it stands."""
    graph = grimp.build_graph(package, cache_dir=None)
    imports = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    try:
        graphlib.TopologicalSorter(imports).prepare()
    except graphlib.CycleError as error:
        return list(error.args[1])
    return None


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run(
        [str(lint), "--no-cache", "--no-logo"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_no_module_imports_itself_back() -> None:
    cycle = import_cycle("tracelab")
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_a_lazy_import_closes_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a package's __init__ dispatching to a module that imports from the __init__ inside a
    # function: the shape the generator had, which a siblings-only check does not see
    package = tmp_path / "layers_probe"
    package.mkdir()
    (package / "__init__.py").write_text(
        "def run():\n    from layers_probe.worker import work\n    return work()\n"
    )
    (package / "worker.py").write_text(
        "def work():\n    from layers_probe import run\n    return run\n"
    )
    (package / "leaf.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cycle = import_cycle("layers_probe")
    assert cycle is not None
    assert set(cycle) == {"layers_probe", "layers_probe.worker"}
    (package / "worker.py").write_text("def work():\n    from layers_probe.leaf import VALUE\n")
    assert import_cycle("layers_probe") is None


def test_reports_compute_no_statistics() -> None:
    # the report formats and draws what the stages computed: no statistics library of its own
    importers = []
    for path in sorted((REPO / "reports").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "scipy" or n.startswith("scipy.") for n in names):
                importers.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not importers, importers


#: what analysis/common/intervals.py computes; reports/ may use its Estimate type and method names
INTERVAL_COMPUTATIONS = frozenset(
    {
        "binomial_rate",
        "mean_interval",
        "clustered_mean_interval",
        "clopper_pearson",
        "t_half_width",
        "quantile_interval",
        "time_average",
        "poisson_rate",
        "ratio_interval",
    }
)


def test_reports_import_no_interval_computation() -> None:
    """Every interval a page prints is computed by its stage (or the comparison) and read from
    its results: reports/ imports the estimate type, never a function that computes one."""
    importers = []
    for path in sorted((REPO / "reports").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: set[str] = set()
            if isinstance(node, ast.ImportFrom):
                names = {a.name for a in node.names} & INTERVAL_COMPUTATIONS
            elif isinstance(node, ast.Attribute) and node.attr in INTERVAL_COMPUTATIONS:
                names = {node.attr}  # ``intervals.binomial_rate`` through a module import
            if names:
                importers.append(f"{path.relative_to(REPO)}:{node.lineno} {sorted(names)}")
    assert not importers, importers
