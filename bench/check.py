"""`make bench-check`: the rows of docs/benchmarks.md whose figure predates the code it measured.

Every ``bench/<name>.py`` declares the files it measures in a module-level
``MEASURES = ("analysis/lake/ingest.py", ...)`` (a folder stands for every file under it). A row of
the ledger (a table with ``benchmark``, ``command``, ``date`` and ``commit`` columns) names its
command (``make bench-<name>`` or ``bench/<name>.py``) and the commit it was measured at; the row is
**stale** when any measured file's code differs between that commit and ``HEAD``. Git follows
renames, and for Python files only the code counts: a file moved and its imports or docstrings
edited is not a change; a SQL file is compared byte for byte. Prints every stale row with the files
that changed, and exits 1 when there is one. Rows whose command is not a benchmark (``tracelab
run``, ``tracelab generate``) are listed as untracked. Never a test itself:
``tests/test_bench_check.py`` checks this logic on a tiny ledger in a throw-away repository.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LEDGER = "docs/benchmarks.md"
_BENCH_COMMAND = re.compile(r"make bench-([a-z_]+)|bench/([a-z_]+)\.py")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


@dataclass(frozen=True)
class Row:
    """One row of the ledger table."""

    line: int
    what: str
    command: str
    date: str
    commit: str


@dataclass(frozen=True)
class Verdict:
    row: Row
    #: the bench the row's command runs ("" when it runs none)
    bench: str
    #: measured files changed since the row's commit (empty: the figure is current)
    changed: tuple[str, ...]
    #: why the row could not be checked ("" when it could)
    problem: str = ""


#: the columns a ledger table has (others, such as ``figure`` and ``machine``, are not read)
COLUMNS = ("benchmark", "command", "date", "commit")


def ledger_rows(text: str) -> list[Row]:
    """The rows of every table whose header has the ``COLUMNS``, in any order."""
    rows: list[Row] = []
    where: dict[str, int] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.lstrip().startswith("|"):
            where = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if where is None:
            names = [c.lower() for c in cells]
            if set(COLUMNS) <= set(names):
                where = {c: names.index(c) for c in COLUMNS}
            continue
        if len(cells) <= max(where.values()) or set("".join(cells)) <= set("-: "):
            continue
        commit = cells[where["commit"]].strip("`")
        if _COMMIT.match(commit):
            what, command, date = (cells[where[c]] for c in ("benchmark", "command", "date"))
            rows.append(Row(number, what, command, date, commit))
    return rows


def measures(bench_file: Path) -> tuple[str, ...]:
    """The bench's ``MEASURES`` tuple, read without importing the bench."""
    tree = ast.parse(bench_file.read_text(), filename=str(bench_file))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "MEASURES" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
                return value
    raise ValueError(
        f'{bench_file.name} declares no MEASURES = ("path", ...) tuple of the files it measures'
    )


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)


def changed_since(repo: Path, commit: str) -> set[str] | None:
    """Paths (at HEAD) whose code differs from ``commit``; None when the commit is unknown."""
    if _git(repo, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        return None
    diff = _git(repo, "diff", "-M", "--name-status", "--no-color", commit, "HEAD")
    changed: set[str] = set()
    for line in diff.stdout.splitlines():
        status, *paths = line.split("\t")
        if status == "R100":
            continue
        if status[0] in "RMA" and paths[-1].endswith(".py"):
            # an added file is new code unless it has none (a package's docstring-only __init__)
            before = _git(repo, "show", f"{commit}:{paths[0]}").stdout if status[0] != "A" else ""
            after = _git(repo, "show", f"HEAD:{paths[-1]}").stdout
            if _code(before) == _code(after):
                continue
        changed.add(paths[-1])
    return changed


def _code(source: str) -> str:
    """The module's code without its imports and docstrings (what its speed depends on)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            node.body = [  # type: ignore[attr-defined]
                n
                for i, n in enumerate(body)
                if not isinstance(n, ast.Import | ast.ImportFrom)
                and not (i == 0 and isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
            ]
    return ast.dump(tree)


def _hits(changed: set[str], measured: tuple[str, ...]) -> tuple[str, ...]:
    prefixes = tuple(m.rstrip("/") + "/" for m in measured)
    return tuple(sorted(p for p in changed if p in measured or p.startswith(prefixes)))


def check(repo: Path) -> list[Verdict]:
    """A verdict for every row of the ledger in ``repo``."""
    benches = {
        p.stem: measures(p) for p in sorted((repo / "bench").glob("*.py")) if p.stem != "check"
    }
    for name, measured in benches.items():
        missing = [m for m in measured if not (repo / m).exists()]
        if missing:
            raise ValueError(
                f"bench/{name}.py MEASURES {', '.join(missing)}, which does not exist: "
                "name the files it measures now"
            )
    verdicts: list[Verdict] = []
    cache: dict[str, set[str] | None] = {}
    for row in ledger_rows((repo / LEDGER).read_text()):
        match = _BENCH_COMMAND.search(row.command)
        bench = (match.group(1) or match.group(2)) if match else ""
        if bench not in benches:
            verdicts.append(Verdict(row, "", (), "not a benchmark command: not tracked"))
            continue
        if row.commit not in cache:
            cache[row.commit] = changed_since(repo, row.commit)
        changed = cache[row.commit]
        if changed is None:
            verdicts.append(
                Verdict(row, bench, (), f"commit {row.commit} is not in this repository")
            )
            continue
        verdicts.append(Verdict(row, bench, _hits(changed, benches[bench])))
    return verdicts


def report(verdicts: list[Verdict]) -> tuple[str, int]:
    """The printed report and the exit status (1 when a row is stale or its commit unknown)."""
    lines: list[str] = []
    failing = 0
    for v in verdicts:
        where = f"{LEDGER}:{v.row.line} ({v.row.date}, {v.row.commit})"
        if v.problem and not v.bench:
            lines.append(f"untracked  {where}: {v.row.what[:70]}")
        elif v.problem or v.changed:
            failing += 1
            why = v.problem or "changed since: " + ", ".join(v.changed)
            lines.append(f"STALE      {where} [bench/{v.bench}.py]: {v.row.what[:70]} — {why}")
    current = sum(1 for v in verdicts if v.bench and not v.problem and not v.changed)
    lines.append(
        f"{failing} stale row(s), {current} current; re-measure a stale row at HEAD and replace "
        "it with the new figure, date and commit"
    )
    return "\n".join(lines), int(failing > 0)


def main() -> int:
    try:
        text, status = report(check(REPO))
    except ValueError as exc:
        print(f"bench-check: {exc}", file=sys.stderr)
        return 2
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
