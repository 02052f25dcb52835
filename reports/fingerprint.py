"""Whether a run's report pages would come out the same as the last ones: a checksum fingerprint.

A page is a function of the files its builder reads, the reports code and the packages that draw
it. The fingerprint combines the SHA-256 of every such file (streamed, so memory does not grow
with the trace), a hash of ``reports/`` (templates included) and of the project modules it imports
(followed transitively, e.g. ``analysis/lake/schemas.py``), the package versions and the list of pages.
File modification times are never looked at: a file rewritten with the same bytes keeps its
fingerprint, and a file changed within the same second does not.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from tracelab.analysis.common.fingerprints import combined_fingerprint, files_fingerprint

if TYPE_CHECKING:
    from tracelab.reports.model import PageSpec

#: the folder holding the installed ``analysis/`` and ``reports/`` (the repo when installed
#: editable, ``site-packages/tracelab`` from the wheel): fingerprints hash what actually runs
REPO = Path(str(files("tracelab.reports"))).parent
_CODE_SUFFIXES = frozenset({".py", ".html", ".css"})
#: sub-packages of ``tracelab`` whose modules the reports may import
_PROJECT_PACKAGES = ("analysis", "reports")
_NAMESPACE = "tracelab."


def reports_code_fingerprint(repo: Path = REPO) -> str:
    """Hash of ``reports/`` (code and templates) and every project module it imports.

    Only imported modules count, so work on, say, the ingest code does not rebuild the pages.
    """
    own = {p for p in (repo / "reports").rglob("*") if p.suffix in _CODE_SUFFIXES and p.is_file()}
    return files_fingerprint(own | imported_project_modules(own, repo))


def imported_project_modules(sources: Iterable[Path], repo: Path = REPO) -> set[Path]:
    """The project's ``.py`` files that ``sources`` import, directly or through each other."""
    todo = [p for p in sources if p.suffix == ".py"]
    seen: set[Path] = set()
    while todo:
        source = todo.pop()
        for name in _imported_names(source):
            if not name.startswith(_NAMESPACE):
                continue
            name = name.removeprefix(_NAMESPACE)
            if name.split(".")[0] not in _PROJECT_PACKAGES:
                continue
            for module in _module_files(name, repo):
                if module not in seen:
                    seen.add(module)
                    todo.append(module)
    return seen


def _imported_names(source: Path) -> set[str]:
    names: set[str] = set()
    for statement in import_statements(source.read_text(encoding="utf-8")):
        try:
            tree = ast.parse(statement)
        except SyntaxError:
            continue  # a docstring's line that reads like an import
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                # ``from analysis import x`` may name a submodule
                names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


_IMPORT_LINE = re.compile(r"^\s*(from\s+\S+\s+import\b|import\s+\S)")


def import_statements(text: str) -> Iterator[str]:
    """Every import statement of a module's source (at any indentation), each on one line.

    Parsing these alone finds what parsing the whole module finds, in a fraction of the time:
    the fingerprint is taken on every run, the reports import a hundred modules.
    """
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if _IMPORT_LINE.match(lines[i]):
            statement = lines[i].split("#", 1)[0].strip()
            while statement.count("(") > statement.count(")") or statement.endswith("\\"):
                i += 1
                if i == len(lines):
                    break
                statement = statement.rstrip("\\") + " " + lines[i].split("#", 1)[0].strip()
            yield statement
        i += 1


def _module_files(name: str, repo: Path) -> list[Path]:
    """The files a dotted module name resolves to: each package's ``__init__`` and the module."""
    parts = name.split(".")
    out: list[Path] = []
    for i in range(1, len(parts) + 1):
        base = repo.joinpath(*parts[:i])
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                out.append(candidate)
    return out


def file_checksum(path: Path) -> str:
    """SHA-256 of a file's bytes, streamed."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def path_checksums(data_dir: Path, relative: str) -> tuple[str, ...]:
    """``relative=checksum`` for a file, for every file under a folder (sorted), or ``=absent``."""
    path = data_dir / relative
    if path.is_file():
        return (f"{relative}={file_checksum(path)}",)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return tuple(f"{p.relative_to(data_dir).as_posix()}={file_checksum(p)}" for p in files)
    return (f"{relative}=absent",)


def page_inputs(specs: Sequence[PageSpec], reads: Iterable[str]) -> tuple[str, ...]:
    """Every path the pages depend on: what they require plus what their builders read."""
    return tuple(sorted({p for s in specs for p in s.inputs} | set(reads)))


def pages_fingerprint(
    data_dir: Path,
    specs: Sequence[PageSpec],
    inputs: Iterable[str],
    code: str,
    versions: Mapping[str, str],
) -> str:
    """One fingerprint of everything the pages of ``specs`` are built from.

    ``inputs`` are paths relative to ``data_dir`` (see :func:`page_inputs`); ``code`` is
    :func:`reports_code_fingerprint`.
    """
    pages = (f"page:{s.slug}:{s.trace}:{s.stage}" for s in specs)
    packages = (f"version:{k}={v}" for k, v in sorted(versions.items()))
    files = (c for p in page_inputs(specs, inputs) for c in path_checksums(data_dir, p))
    return combined_fingerprint("reports", code, *pages, *packages, *files)
