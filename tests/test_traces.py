"""A trace is one declaration: its id is spelled in its own module under analysis/traces/ and
nowhere else in the source; everything else reads the declarations."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from repo_paths import REPO

from tracelab.analysis.traces import TRACE_IDS, TRACES, trace_spec, traces_feeding


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (prose may name a trace)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def files_spelling(trace_id: str, root: Path = REPO) -> list[str]:
    """Source files with a string literal (docstrings aside) containing the trace id."""
    out = []
    for folder in ("analysis", "flows", "reports"):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = docstrings(tree)
            if any(
                isinstance(n, ast.Constant)
                and isinstance(n.value, str)
                and id(n) not in skip
                and trace_id in n.value
                for n in ast.walk(tree)
            ):
                out.append(path.relative_to(root).as_posix())
    return out


@pytest.mark.parametrize("trace_id", TRACE_IDS)
def test_a_trace_id_is_spelled_only_in_its_declaration(trace_id: str) -> None:
    module = trace_spec(trace_id).generator.entry.split(":")[0].rsplit(".", 1)[1]
    assert files_spelling(trace_id) == [f"analysis/traces/{module}.py"]


def test_the_literal_scan_finds_a_spelled_id(tmp_path: Path) -> None:
    # the scan must see code strings and f-strings, and pass over docstrings
    for folder in ("analysis", "flows", "reports"):
        (tmp_path / folder).mkdir()
    (tmp_path / "analysis" / "a.py").write_text('"""google-2011 in prose"""\nX = "google-2011"\n')
    (tmp_path / "flows" / "b.py").write_text('def f(n):\n    """google-2011"""\n    return n\n')
    (tmp_path / "reports" / "c.py").write_text('Y = f"tracelab derive --trace google-2011 {1}"\n')
    assert files_spelling("google-2011", tmp_path) == ["analysis/a.py", "reports/c.py"]


def test_every_declaration_is_complete() -> None:
    for spec in TRACES:
        assert spec.tables, spec.id
        assert all(t.trace == spec.id for t in spec.tables), spec.id
        module, _, function = spec.generator.entry.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), spec.id
        assert {"derive", "export"} <= set(spec.stages), spec.id
        if spec.comparison is not None:
            assert spec.comparison.trace == spec.id


def test_ids_are_unique_and_looked_up() -> None:
    assert len(set(TRACE_IDS)) == len(TRACE_IDS)
    assert trace_spec(TRACE_IDS[-1]) is TRACES[-1]
    with pytest.raises(ValueError, match="unknown trace 'google-2012'; known traces: google-2011"):
        trace_spec("google-2012")


def test_a_stage_runs_on_the_traces_that_declare_it() -> None:
    assert traces_feeding("derive") == TRACE_IDS
    assert traces_feeding("packing") == ("google-2011",)
    assert traces_feeding("admission") == ("azure-2017",)
    assert traces_feeding("no-such-stage") == ()
