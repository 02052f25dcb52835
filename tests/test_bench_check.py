"""`make bench-check` (bench/check.py) on a tiny ledger in a throw-away git repository.

The repository's history is made here, so which rows are stale is known by construction: a row
is stale when a file its bench measures changed after the row's commit; a move that edits only
imports and docstrings, a new docstring-only ``__init__.py`` and a change to a file the bench
does not measure are not changes.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "bench_check", Path(__file__).resolve().parent.parent / "bench" / "check.py"
)
assert _SPEC is not None
assert _SPEC.loader is not None
check = importlib.util.module_from_spec(_SPEC)
sys.modules["bench_check"] = check
_SPEC.loader.exec_module(check)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)
    return _git(repo, "rev-parse", "--short=10", "HEAD")


_CODE = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(20))


def _bench(measured: str) -> str:
    return f'"""A fake benchmark."""\n\nMEASURES = ("{measured}", "lib", "queries")\n'


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    _git(tmp_path, "init", "-q")
    c1 = _commit(
        tmp_path,
        {
            "mod.py": '"""Doc."""\nimport os\n\n' + _CODE,
            "queries/a.sql": "select 1\n",
            "other.py": "x = 1\n",
            "bench/fake.py": _bench("mod.py"),
        },
        "c1",
    )
    c2 = _commit(tmp_path, {"queries/a.sql": "select 2\n"}, "c2: a measured query changes")
    (tmp_path / "lib").mkdir()
    _git(tmp_path, "mv", "mod.py", "lib/mod.py")
    c3 = _commit(
        tmp_path,
        {
            "lib/mod.py": '"""Doc, moved."""\nimport sys\n\n' + _CODE,
            "lib/__init__.py": '"""lib."""\n',
            "other.py": "x = 2\n",
            "bench/fake.py": _bench("lib/mod.py"),
        },
        "c3: the measured module moved (imports, docstring edited), an unmeasured file changed",
    )
    return tmp_path, {"c1": c1, "c2": c2, "c3": c3}


def _ledger(repo: Path, rows: list[tuple[str, str, str]]) -> None:
    # the columns in another order than the repository's ledger: they are found by name
    lines = [
        "| benchmark | figure | date | command | commit | machine |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {what} | 1 s | 2026-01-01 | {command} | {commit} | std |"
        for what, command, commit in rows
    ]
    _commit(repo, {"docs/benchmarks.md": "# Benchmarks\n\n" + "\n".join(lines) + "\n"}, "ledger")


def test_rows_measured_before_a_change_to_measured_code_are_stale(
    repo: tuple[Path, dict[str, str]],
) -> None:
    root, c = repo
    _ledger(
        root,
        [
            ("old figure", "`make bench-fake`", c["c1"]),
            ("after the query change", "`bench/fake.py --quick`", c["c2"]),
            ("at the rename", "`make bench-fake`", c["c3"]),
            ("whole pipeline", "`make run`", c["c3"]),
            ("lost commit", "`make bench-fake`", "0123abc"),
        ],
    )
    verdicts = check.check(root)
    assert [(v.row.what, v.bench, v.changed, bool(v.problem)) for v in verdicts] == [
        ("old figure", "fake", ("queries/a.sql",), False),
        # c3 moved mod.py without changing its code and changed other.py, which is not measured
        ("after the query change", "fake", (), False),
        ("at the rename", "fake", (), False),
        ("whole pipeline", "", (), True),
        ("lost commit", "fake", (), True),
    ]
    text, status = check.report(verdicts)
    assert status == 1
    assert text.count("STALE") == 2  # the old figure and the lost commit
    assert "2 stale row(s), 2 current" in text


def test_a_measures_path_that_no_longer_exists_is_refused(
    repo: tuple[Path, dict[str, str]],
) -> None:
    root, c = repo
    (root / "bench" / "fake.py").write_text(_bench("mod.py"))  # the name before the move
    _ledger(root, [("figure", "`make bench-fake`", c["c3"])])
    with pytest.raises(ValueError, match=r"bench/fake\.py MEASURES mod\.py, which does not exist"):
        check.check(root)


def test_the_repository_ledger_parses_and_every_bench_declares_what_it_measures() -> None:
    root = Path(__file__).resolve().parent.parent
    rows = check.ledger_rows((root / "docs" / "benchmarks.md").read_text())
    assert rows
    assert all(len(r.commit) >= 7 for r in rows)
    for bench in sorted((root / "bench").glob("*.py")):
        if bench.stem != "check":
            assert all((root / m).exists() for m in check.measures(bench)), bench.name


def test_the_repository_ledger_has_one_current_row_per_benchmark() -> None:
    """History lives in git: no row is kept beside the one that replaced it."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md").read_text()
    assert "superseded" not in text.lower()
    table = [line for line in text.splitlines() if line.startswith("| ")]
    rows = check.ledger_rows(text)
    assert len(rows) == len(table) - 1, "every row of the table names its date and commit"
    for name, values in (
        ("benchmark", [r.what for r in rows]),
        ("command", [r.command for r in rows]),
    ):
        repeated = sorted({v for v in values if values.count(v) > 1})
        assert not repeated, f"{name} in more than one row of docs/benchmarks.md: {repeated}"
    for line in table:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 6, f"not 6 columns: {line[:80]}"
        assert all(cells), f"a row without figure or machine: {line[:80]}"


def test_no_bench_script_shadows_a_standard_library_module() -> None:
    # a bench runs as `python bench/<name>.py`, so bench/ is first on sys.path: a bench named
    # statistics.py would be what `import statistics` finds in every other bench
    names = {p.stem for p in (Path(__file__).resolve().parent.parent / "bench").glob("*.py")}
    assert names, "no bench scripts found"
    assert not names & set(sys.stdlib_module_names)
