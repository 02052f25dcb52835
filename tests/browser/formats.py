"""The site's one number format, checked on a rendered page: 3 significant digits, scientific
notation below 0.001 and from 100,000 up only (reports/numfmt.py), an interval in one notation.

Left out, as the rule allows: counts (integers), "Parameters of this run" (values as they ran),
the paper's own numbers (``Paper.`` paragraphs), code, and table columns that need more digits
(:data:`WIDE_COLUMNS`).
"""

from __future__ import annotations

import html
import re

#: columns whose values need more than 3 digits: a log-likelihood is compared by differences,
#: a tuned threshold sits on a grid of 1/64
WIDE_COLUMNS = ("log-likelihood", "threshold T")
_NUMBER = r"-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?"
_INTERVAL = re.compile(rf"(?<![\w.])({_NUMBER}) \[({_NUMBER}), ({_NUMBER})\]")
_DECIMAL = re.compile(
    r"(?<![\w.^/:#-])(\d[\d,]*\.\d+(?:e[-+]?\d+)?|\d(?:\.\d+)?e[-+]?\d+)(?![\w.])"
)


def _digits(number: str) -> int:
    """Significant digits as written (an integer's trailing zeros are not: 3,570 has 3)."""
    mantissa = number.split("e")[0].replace(",", "").replace("-", "")
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits if "." in mantissa else digits.rstrip("0"))


def _sci_ok(number: str) -> bool:
    """A number written in the notation its size calls for."""
    value = abs(float(number.replace(",", "")))
    sci = "e" in number
    return value == 0 or sci == (value < 1e-3 or value >= 1e5)


def _visible(page: str) -> str:
    """The page's text without what the rule leaves out, wide columns' cells included."""
    page = re.sub(r'<section id="parameters">.*?</section>', " ", page, flags=re.S)
    page = re.sub(r'<p class="paper">.*?</p>', " ", page, flags=re.S)
    page = re.sub(r"<code>.*?</code>", " ", page, flags=re.S)
    for table in re.findall(r"<table.*?</table>", page, flags=re.S):
        heads = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", table, flags=re.S)]
        wide = {i for i, h in enumerate(heads) if h in WIDE_COLUMNS}
        kept = table
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, flags=re.S):
            cells = re.findall(r"<td>(.*?)</td>", row, flags=re.S)
            narrow = " | ".join(c for i, c in enumerate(cells) if i not in wide)
            kept = kept.replace(row, narrow, 1)
        page = page.replace(table, kept, 1)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def format_violations(page: str) -> list[str]:
    """Every number on ``page`` written against the site's format, with a few words around it."""
    text = _visible(page)
    bad = []
    for m in _INTERVAL.finditer(text):
        parts = [p for p in m.groups() if float(p.replace(",", "")) != 0]
        if len({"e" in p for p in parts}) > 1:
            bad.append(f"interval in two notations: {m.group(0)}")
        bad += [f"more than 3 digits: {m.group(0)}" for p in parts if _digits(p) > 3]
    # an interval may be all scientific for one small bound; its own notation was checked above
    for m in _DECIMAL.finditer(_INTERVAL.sub(" ", text)):
        number = m.group(1)
        if _digits(number) > 3 or not _sci_ok(number):
            bad.append(m.group(0))
    return bad
