"""Code kept readable: short functions, one atomic-write helper, no issue numbers."""

from __future__ import annotations

import ast
import re

from repo_paths import REPO

MAX_LINES = 80


def test_no_function_is_longer_than_80_lines() -> None:
    long: list[str] = []
    for folder in ("analysis", "flows", "reports"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_LINES:
                        long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines})")
    assert not long, "split these functions: " + "; ".join(long)


def test_one_atomic_write_helper() -> None:
    # temp-file-and-rename is written once (analysis/common/atomic.py); the exceptions commit several
    # files together (an ingested file's rows and rejects, a run's site folder) or resume a
    # partial download / a streamed gzip part, which a one-file helper cannot express
    allowed = {"atomic.py", "ingest.py", "download.py", "csvparts.py", "site.py"}
    offenders = []
    for folder in ("analysis", "flows", "reports"):
        for path in sorted((REPO / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if path.name not in allowed and ("tmp.replace(" in text or "partial.replace(" in text):
                offenders.append(str(path.relative_to(REPO)))
    assert not offenders, f"use tracelab.analysis.common.atomic instead: {offenders}"


def test_no_issue_numbers_in_code() -> None:
    # a comment says why; which issue asked for it is history, and history lives in git
    pattern = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
    found = []
    for folder in ("analysis", "flows", "reports", "queries", "bench", "tests"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix in {".py", ".sql", ".html"} and path.is_file():
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    if pattern.search(line):
                        found.append(f"{path.relative_to(REPO)}:{number}")
    assert not found, "issue numbers in code: " + "; ".join(found)
