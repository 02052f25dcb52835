"""The static report site: one folder per run, an index of runs, pages built from stage outputs.

Layout (``DATA/site``)::

    index.html                 the latest run's index (links into runs/<run_id>/) + the run history
    static/style.css           the only stylesheet (no CDN, no web fonts, no scripts)
    runs/<run_id>/index.html   that run's metadata and page list
    runs/<run_id>/<slug>.html  one page per stage; figures in runs/<run_id>/<slug>/*.png
    runs/<run_id>/params.json  the params export of that run, copied
    runs/<run_id>/run.json     the run's metadata as JSON (the history is read from these)

A run folder is written under a temporary name and renamed when complete, so a crashed build
never leaves a half run in the history.
"""

from __future__ import annotations

import json
import shutil
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2

from analysis.errors import TracelabError
from reports.metadata import (
    Parameter,
    StageTiming,
    TraceInputs,
    recorded_timings,
    stage_parameters,
    trace_inputs,
    versions,
)
from reports.model import InputsMissing, Number, Page, PageContext, PageSpec

TEMPLATES = Path(__file__).resolve().parent / "templates"
RUN_FILE = "run.json"
TRACES = ("google-2011", "azure-2017")


@dataclass(frozen=True)
class PageLink:
    slug: str
    title: str
    trace: str
    file: str
    unavailable: str


@dataclass(frozen=True)
class RunInfo:
    """Everything the index shows about one run (serialised as ``run.json``)."""

    run_id: str
    created_at: str
    traces: tuple[str, ...]
    pages: tuple[PageLink, ...]
    timings: tuple[StageTiming, ...]
    parameters: tuple[Parameter, ...]
    versions: dict[str, str]
    inputs: dict[str, TraceInputs] = field(default_factory=dict)
    params_file: str = ""


@dataclass(frozen=True)
class SiteBuild:
    """What :func:`build_site` wrote."""

    run_id: str
    run_dir: Path
    index: Path
    pages: tuple[Page, ...]


def new_run_id(site_dir: Path, now: datetime) -> str:
    """A timestamp id (``20261122T163000Z``), suffixed when that second is taken already."""
    base = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    run_id, n = base, 1
    while (site_dir / "runs" / run_id).exists():
        n += 1
        run_id = f"{base}-{n}"
    return run_id


def build_site(
    data_dir: Path,
    *,
    specs: Sequence[PageSpec] | None = None,
    run_id: str | None = None,
    timings: Sequence[StageTiming] = (),
    run_parameters: Sequence[Parameter] = (),
    now: datetime | None = None,
    strict: bool = False,
    on_page: Callable[[Page], None] | None = None,
) -> SiteBuild:
    """Build one run's pages under ``DATA/site/runs/<run_id>`` and refresh ``DATA/site/index.html``.

    A page whose inputs are absent is still written, with a visible "not available in this run"
    note naming the missing files and the command that makes them. With ``strict`` a page
    builder's unexpected error propagates (tests); otherwise the page shows the error.
    """
    if specs is None:
        from reports.pages import ALL_PAGES

        specs = ALL_PAGES
    now = now or datetime.now(UTC)
    site_dir = data_dir / "site"
    runs_dir = site_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    run_id = run_id or new_run_id(site_dir, now)
    final_dir = runs_dir / run_id
    if final_dir.exists():
        raise TracelabError(f"report run {final_dir} exists already: pick another --run-id")
    tmp_dir = runs_dir / f".{run_id}.tmp"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    tmp_dir.mkdir(parents=True)

    pages: list[Page] = []
    for spec in specs:
        page = _page(spec, data_dir, tmp_dir, strict=strict)
        pages.append(page)
        if on_page is not None:
            on_page(page)

    params_file = ""
    export = data_dir / "exports" / "params.json"
    if export.is_file():
        shutil.copyfile(export, tmp_dir / "params.json")
        params_file = "params.json"

    inputs = {
        t: trace_inputs(data_dir / "lake" / t / "_manifest.parquet")
        for t in TRACES
        if (data_dir / "lake" / t / "_manifest.parquet").is_file()
    }
    traces = tuple(
        t
        for t in TRACES
        if any((data_dir / d / t).exists() for d in ("raw", "lake", "derived", "results"))
    )
    run = RunInfo(
        run_id=run_id,
        created_at=now.astimezone(UTC).isoformat(timespec="seconds"),
        traces=traces,
        pages=tuple(PageLink(p.slug, p.title, p.trace, p.file, p.unavailable) for p in pages),
        timings=tuple(timings) or recorded_timings(data_dir),
        parameters=tuple(run_parameters) + stage_parameters(data_dir / "results"),
        versions=versions(),
        inputs=inputs,
        params_file=params_file,
    )
    env = _environment()
    (tmp_dir / RUN_FILE).write_text(json.dumps(asdict(run), indent=2), encoding="utf-8")
    for page in pages:
        html = env.get_template("page.html").render(page=page, run=run, root="../../")
        (tmp_dir / page.file).write_text(html, encoding="utf-8")
    history = _history(runs_dir, extra=run)
    (tmp_dir / "index.html").write_text(
        env.get_template("index.html").render(
            run=run,
            root="../../",
            prefix="",
            history=[h | {"href": f"../{h['run_id']}/index.html"} for h in history],
        ),
        encoding="utf-8",
    )
    tmp_dir.replace(final_dir)

    static = site_dir / "static"
    static.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TEMPLATES / "style.css", static / "style.css")
    index = site_dir / "index.html"
    _write_atomic(
        index,
        env.get_template("index.html").render(
            run=run,
            root="",
            prefix=f"runs/{run_id}/",
            history=[h | {"href": f"runs/{h['run_id']}/index.html"} for h in history],
        ),
    )
    return SiteBuild(run_id=run_id, run_dir=final_dir, index=index, pages=tuple(pages))


def _page(spec: PageSpec, data_dir: Path, run_dir: Path, *, strict: bool) -> Page:
    base = Page(
        slug=spec.slug, title=spec.title, trace=spec.trace, stage=spec.stage, sources=spec.inputs
    )
    missing = [p for p in spec.inputs if not (data_dir / p).exists()]
    if missing:
        reason = f"missing {', '.join(missing)} — run `{spec.command}` to produce it."
        return replace(base, unavailable=reason)
    ctx = PageContext(data_dir=data_dir, out_dir=run_dir / spec.slug, trace=spec.trace)
    try:
        sections = tuple(spec.build(ctx))
    except InputsMissing as exc:
        return replace(base, unavailable=f"{exc} — run `{spec.command}`.")
    except Exception as exc:
        if strict:
            raise
        shutil.rmtree(ctx.out_dir, ignore_errors=True)
        last = traceback.format_exception_only(exc)[-1].strip()
        return replace(base, unavailable=f"the page could not be built ({last}).")
    numbers = {f.key: f.value for s in sections for f in s.this_run if isinstance(f, Number)}
    return replace(base, sections=sections, numbers=numbers)


def _history(runs_dir: Path, extra: RunInfo) -> list[dict[str, Any]]:
    """Every finished run (newest first), read from its ``run.json``."""
    rows: dict[str, dict[str, Any]] = {}
    for path in runs_dir.glob(f"*/{RUN_FILE}"):
        if path.parent.name.startswith("."):
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            pages = doc.get("pages", [])
            rows[doc["run_id"]] = {
                "run_id": doc["run_id"],
                "created_at": doc.get("created_at", ""),
                "traces": list(doc.get("traces", [])),
                "pages": len(pages),
                "available": sum(1 for p in pages if not p.get("unavailable")),
            }
        except (OSError, ValueError, KeyError, TypeError):
            continue
    rows[extra.run_id] = {
        "run_id": extra.run_id,
        "created_at": extra.created_at,
        "traces": list(extra.traces),
        "pages": len(extra.pages),
        "available": sum(1 for p in extra.pages if not p.unavailable),
    }
    return sorted(rows.values(), key=lambda r: (r["created_at"], r["run_id"]), reverse=True)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["repr"] = repr
    return env


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
