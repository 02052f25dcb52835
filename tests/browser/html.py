"""Pulling what the report tests check out of a page: numbers, links, images (stdlib parser)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path


@dataclass
class PageRefs:
    numbers: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    images: list[tuple[str, str]] = field(default_factory=list)  # (src, alt)
    links: list[str] = field(default_factory=list)  # a href and link href
    scripts: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs = PageRefs()
        self._num: str | None = None
        self._unavailable = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "span" and "data-key" in a:
            self.refs.numbers[a["data-key"]] = float(a["data-value"])
            self._num = a["data-key"]
        elif tag == "img":
            self.refs.images.append((a.get("src", ""), a.get("alt", "")))
        elif tag in ("a", "link") and "href" in a:
            self.refs.links.append(a["href"])
        elif tag == "script":
            self.refs.scripts.append(a.get("src", "inline"))
        elif tag == "p" and "unavailable" in a.get("class", ""):
            self._unavailable = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "span":
            self._num = None
        if tag == "p":
            self._unavailable = False

    def handle_data(self, data: str) -> None:
        if self._num is not None:
            self.refs.texts[self._num] = data
        if self._unavailable:
            self.refs.unavailable.append(data)


def page_refs(html: str) -> PageRefs:
    parser = _Parser()
    parser.feed(html)
    return parser.refs


def read_refs(path: Path) -> PageRefs:
    return page_refs(path.read_text(encoding="utf-8"))
