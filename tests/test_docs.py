"""The README stays short and every page it links exists."""

from __future__ import annotations

import re

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
