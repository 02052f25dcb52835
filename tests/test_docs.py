"""The README stays short, every page it links exists, and the docs stand without ../shared."""

from __future__ import annotations

import re
from pathlib import Path

from repo_paths import REPO


def test_readme_is_short_and_its_links_resolve() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text) <= 8000, f"README.md has {len(text)} characters; move details to docs/"
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links
    for link in links:
        if not link.startswith("http"):
            assert (REPO / link).is_file(), link


def test_every_docs_page_is_linked_from_the_readme_or_the_docs() -> None:
    pages = {p.name for p in (REPO / "docs").glob("*.md")}
    text = (REPO / "README.md").read_text(encoding="utf-8") + "".join(
        p.read_text(encoding="utf-8") for p in (REPO / "docs").glob("*.md")
    )
    unlinked = sorted(p for p in pages if p not in text)
    assert not unlinked, f"docs pages nobody links to: {unlinked}"


#: the folders (and file) whose text must stand alone, without ../shared beside the repository
_STANDALONE = ("analysis", "flows", "reports", "queries", "docs", "README.md")
#: what only ../shared explains: a seed file's number or name, or its methods page
_NEEDS_SHARED = re.compile(
    r"seed 00\d|\.\./shared/docs|\b00\d_[0-9a-f]{16}\.txt|(?-i:METHODS(?: §|\.md))", re.IGNORECASE
)
#: "docs/methods.md §2.1–2.5 and §2.7": the sections after the page name
_METHODS_REF = re.compile(
    r"docs/methods\.md((?:,? (?:and )?§\d+(?:\.\d+)?(?:[–-]\d+(?:\.\d+)?)?)+)"
)


def _text_files(*roots: str) -> list[Path]:
    files: list[Path] = []
    for root in roots:
        path = REPO / root
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        files += [
            p
            for p in candidates
            if p.is_file()
            and "__pycache__" not in p.parts
            and p.suffix in {".py", ".md", ".sql", ".html", ".json", ".css", ".js", ".txt"}
        ]
    return files


def _methods_sections() -> set[str]:
    """Section numbers of docs/methods.md: "## 1. Derived tables" -> "1", "### 1.8 ..." -> "1.8"."""
    text = (REPO / "docs" / "methods.md").read_text(encoding="utf-8")
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, flags=re.MULTILINE))


def test_no_file_needs_the_shared_folder_to_be_understood() -> None:
    offenders = [
        f"{p.relative_to(REPO)}:{n}: {m.group(0)}"
        for p in _text_files(*_STANDALONE)
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1)
        if (m := _NEEDS_SHARED.search(line))
    ]
    assert not offenders, "cite docs/methods.md and the papers' short names instead:\n" + "\n".join(
        offenders
    )


def test_methods_page_has_every_section_and_cites_papers_by_title() -> None:
    sections = _methods_sections()
    expected = {"0", "1", "2", "3", "4", "0.1", "0.2", "0.3"}
    expected |= {f"1.{i}" for i in range(1, 10)} | {f"2.{i}" for i in range(1, 8)}
    expected |= {f"3.{i}" for i in range(1, 5)}
    assert expected <= sections, sorted(expected - sections)
    text = " ".join((REPO / "docs" / "methods.md").read_text(encoding="utf-8").split())
    for title in (
        "SLO-aware Colocation of Data Center Tasks Based on Instantaneous Processor Requirements",
        "10 Observations on Google Cluster Trace",
        "Resource Allocation using Virtual Clusters",
        "LAVA: Lifetime-Aware VM Allocation",
        "On the cluster admission problem for cloud computing",
    ):
        assert title in text, title


def test_every_methods_reference_names_an_existing_section() -> None:
    from tracelab.flows.registry import STAGES

    sections = _methods_sections()
    refs = [
        (f"{p.relative_to(REPO)}", number)
        for p in _text_files(*_STANDALONE, "tests", "bench")
        for group in _METHODS_REF.findall(p.read_text(encoding="utf-8"))
        for number in re.findall(r"\d+(?:\.\d+)?", group)
    ]
    refs += [
        (f"registry: {s.name}", number)
        for s in STAGES
        for number in re.findall(r"\d+(?:\.\d+)?", s.methods)
    ]
    assert len(refs) > 40, "the references were not found: is the pattern still right?"
    missing = [f"{where}: §{number}" for where, number in refs if number not in sections]
    assert not missing, missing


#: what a lab notebook has and a reference page does not: issue numbers, re-measurement stories,
#: commit hashes (a hex word with a digit and a letter; the benchmark ledger alone names commits)
_HISTORY = re.compile(
    r"\bissues? #?\d+|\bre-measured\b|\bsuperseded\b|(?<![.\w])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}\b",
    re.IGNORECASE,
)


def test_docs_are_reference_without_history() -> None:
    offenders = [
        f"{p.relative_to(REPO)}:{n}: {m.group(0)}"
        for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
        if p.name != "benchmarks.md"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1)
        if (m := _HISTORY.search(line))
    ]
    assert not offenders, "history lives in git and docs/benchmarks.md:\n" + "\n".join(offenders)


def test_docs_index_links_every_page() -> None:
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md") if p.name != "index.md")
    assert [p for p in pages if f"]({p}" not in index] == []
    assert "(docs/index.md)" in (REPO / "README.md").read_text(encoding="utf-8")
