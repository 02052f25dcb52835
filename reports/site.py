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

Unchanged pages are not rebuilt when asked (``reuse_unchanged``, what ``tracelab run`` and the
nightly flow do): ``run.json`` records a fingerprint of the pages' inputs (checksums of every file
the page builders read, the reports code, package versions; ``reports/fingerprint.py``). When the
fingerprint now equals the latest run's, the new run folder gets only its own ``run.json`` (with
``pages_from: <run that built the pages>``), ``index.html`` and ``params.json``; its index links
the pages of the run that built them. Every run is in the history either way, marked "built" or
"reused from <run>".
"""

from __future__ import annotations

import json
import shutil
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2

from tracelab.analysis.common.atomic import atomic_write_text
from tracelab.analysis.common.datapaths import PARAMS_EXPORT, stage_results
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.safety import checked_run_id, remove_stale_temp_dirs
from tracelab.analysis.common.shortfall import read_shortfall, read_shortfalls
from tracelab.analysis.common.stage_outputs import SUMMARY_FILE, read_headline
from tracelab.analysis.lake.availability import derived_shortfall
from tracelab.analysis.lake.headlines import SUMMARY_SUFFIX, read_table_headline
from tracelab.analysis.lake.provenance import data_source
from tracelab.analysis.lake.schemas import TRACES as LAKE_TRACES
from tracelab.reports import numfmt
from tracelab.reports.fingerprint import page_inputs, pages_fingerprint, reports_code_fingerprint
from tracelab.reports.metadata import (
    InputFile,
    Parameter,
    StageTiming,
    TableRows,
    TraceInputs,
    data_sources,
    recorded_timings,
    stage_parameters,
    trace_inputs,
    versions,
)
from tracelab.reports.model import (
    InputsMissing,
    NotEnoughData,
    Number,
    Page,
    PageContext,
    PageSpec,
    Section,
)

TEMPLATES = Path(__file__).resolve().parent / "templates"
RUN_FILE = "run.json"
#: every trace the lake knows, in its registry order
TRACES = tuple(LAKE_TRACES)
#: how a page that raised says so (such a run's pages are never reused: the next run retries)
_BUILD_ERROR = "the page could not be built"


@dataclass(frozen=True)
class PageLink:
    slug: str
    title: str
    trace: str
    file: str
    unavailable: str
    #: the page's stage and inputs, so a later run can tell whether the page would come out the
    #: same without loading the page builders (empty in run.json files written before)
    stage: str = ""
    sources: tuple[str, ...] = ()
    headline: str = ""
    #: the condition the headline holds under, read from the stage's summary.json
    condition: str = ""


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
    #: the run whose page files this run shows (itself when it built them)
    pages_from: str = ""
    #: fingerprint of everything the pages are built from; "" when a page failed to build
    pages_fingerprint: str = ""
    #: the paths (relative to DATA) whose checksums the fingerprint covers
    page_inputs: tuple[str, ...] = ()
    #: per trace (and "all"), what the data is: the synthetic sample or real files
    sources: dict[str, str] = field(default_factory=dict)
    #: ``{"kind": real|synthetic|mixed|…, "files": [{trace, table, path, kind, sha256}]}``
    source: dict[str, Any] = field(default_factory=dict)
    #: traces absent from the data directory and how many pages they would have had
    pages_left_out: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SiteBuild:
    """What :func:`build_site` wrote."""

    run_id: str
    run_dir: Path
    index: Path
    pages: tuple[Page, ...]
    #: the run whose page files this run shows (``run_id`` itself when it built them)
    pages_from: str
    #: the report step of this run: ``ok`` (pages built) or ``unchanged`` (pages reused)
    timing: StageTiming

    @property
    def reused(self) -> bool:
        """True when this run did not build pages but links those of ``pages_from``."""
        return bool(self.pages_from) and self.pages_from != self.run_id


@dataclass(frozen=True)
class _BuiltPages:
    """Pages an earlier run built, as its ``run.json`` describes them."""

    run_id: str
    fingerprint: str
    inputs: tuple[str, ...]
    links: tuple[PageLink, ...]
    #: the traces the data directory held when the run was made, and the pages of absent traces
    traces: tuple[str, ...] = ()
    left_out: dict[str, int] = field(default_factory=dict)


def new_run_id(site_dir: Path, now: datetime) -> str:
    """A timestamp id (``20261122T163000Z``), suffixed when that second is taken already."""
    base = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    run_id, n = base, 1
    while (site_dir / "runs" / run_id).exists():
        n += 1
        run_id = f"{base}-{n}"
    return run_id


@dataclass(frozen=True)
class _PagesOfRun:
    """The pages a run shows (built now or reused) and what their fingerprint covers."""

    pages: tuple[Page, ...]
    links: tuple[PageLink, ...]
    inputs: tuple[str, ...]
    fingerprint: str
    pages_from: str
    note: str
    reused: bool


def _built_pages(
    specs: Sequence[PageSpec],
    data_dir: Path,
    tmp_dir: Path,
    run_id: str,
    fingerprint_of: Callable[[tuple[str, ...]], str],
    *,
    strict: bool,
    on_page: Callable[[Page], None] | None,
) -> _PagesOfRun:
    built: list[Page] = []
    reads: list[str] = []
    for spec in specs:
        page, page_reads = _page(spec, data_dir, tmp_dir, strict=strict)
        built.append(page)
        reads.extend(page_reads)
        if on_page is not None:
            on_page(page)
    pages = tuple(built)
    inputs_used = page_inputs(specs, reads)
    failed = any(p.unavailable.startswith(_BUILD_ERROR) for p in pages)
    return _PagesOfRun(
        pages=pages,
        links=tuple(
            PageLink(
                p.slug,
                p.title,
                p.trace,
                p.file,
                p.unavailable,
                stage=p.stage,
                sources=p.sources,
                headline=p.headline,
                condition=p.condition,
            )
            for p in pages
        ),
        inputs=inputs_used,
        fingerprint="" if failed else fingerprint_of(inputs_used),
        pages_from=run_id,
        note=f"{sum(1 for p in pages if not p.unavailable)}/{len(pages)} pages built",
        reused=False,
    )


def _reused_pages(specs: Sequence[PageSpec], prior: _BuiltPages) -> _PagesOfRun:
    pages = tuple(
        Page(s.slug, s.title, s.trace, s.stage, sources=s.inputs, unavailable=link.unavailable)
        for s, link in zip(specs, prior.links, strict=True)
    )
    note = (
        f"pages reused from run {prior.run_id}: the checksums of their {len(prior.inputs)} "
        "inputs, the reports code and package versions are unchanged"
    )
    return _PagesOfRun(
        pages, prior.links, prior.inputs, prior.fingerprint, prior.run_id, note, reused=True
    )


def _run_info(
    data_dir: Path,
    run_id: str,
    now: datetime,
    shown: _PagesOfRun,
    timings: Sequence[StageTiming],
    run_parameters: Sequence[Parameter],
    package_versions: dict[str, str],
    params_file: str,
) -> RunInfo:
    inputs = {
        t: trace_inputs(data_dir / "lake" / t / "_manifest.parquet")
        for t in TRACES
        if (data_dir / "lake" / t / "_manifest.parquet").is_file()
    }
    traces = traces_present(data_dir)
    return RunInfo(
        run_id=run_id,
        created_at=now.astimezone(UTC).isoformat(timespec="seconds"),
        traces=traces,
        pages=shown.links,
        timings=tuple(timings),
        parameters=tuple(run_parameters) + stage_parameters(data_dir / "results"),
        versions=package_versions,
        inputs=inputs,
        params_file=params_file,
        pages_from=shown.pages_from,
        pages_fingerprint=shown.fingerprint,
        page_inputs=shown.inputs,
        sources=data_sources(data_dir, traces),
        source=data_source(data_dir, traces),
    )


def _copy_params(data_dir: Path, run_dir: Path) -> str:
    """The params export copied into the run's folder: its name there, or "" without one."""
    if not PARAMS_EXPORT.path(data_dir).is_file():
        return ""
    shutil.copyfile(PARAMS_EXPORT.path(data_dir), run_dir / "params.json")
    return "params.json"


def traces_present(data_dir: Path) -> tuple[str, ...]:
    """The traces the data directory holds anything of (raw files, lake, derived, results)."""
    return tuple(
        t
        for t in TRACES
        if any((data_dir / d / t).exists() for d in ("raw", "lake", "derived", "results"))
    )


def pages_for_data(
    specs: Sequence[PageSpec], present: tuple[str, ...]
) -> tuple[tuple[PageSpec, ...], dict[str, int]]:
    """The pages of the traces present (:func:`traces_present`) and the cross-trace pages, and
    how many pages each absent trace would have had. A directory with no trace at all keeps
    every page, so its index still names the command that makes each page's inputs."""
    if not present:
        return tuple(specs), {}
    shown = tuple(s for s in specs if s.trace == "all" or s.trace in present)
    left_out: dict[str, int] = {}
    for s in specs:
        if s not in shown:
            left_out[s.trace] = left_out.get(s.trace, 0) + 1
    return shown, left_out


def _write_run_dir(tmp_dir: Path, run: RunInfo, shown: _PagesOfRun, history: Any) -> None:
    """run.json, the pages (when built now) and the run's own index, into the temp folder."""
    env = _environment()
    (tmp_dir / RUN_FILE).write_text(json.dumps(asdict(run), indent=2), encoding="utf-8")
    if not shown.reused:
        pages = shown.pages
        for i, page in enumerate(pages):
            html = env.get_template("page.html").render(
                page=page,
                run=run,
                root="../../",
                prev=pages[i - 1] if i > 0 else None,
                next=pages[i + 1] if i + 1 < len(pages) else None,
            )
            (tmp_dir / page.file).write_text(html, encoding="utf-8")
    index = env.get_template("index.html").render(
        run=run,
        root="../../",
        prefix="",
        pages_prefix=f"../{shown.pages_from}/" if shown.reused else "",
        history=_with_hrefs(history, "../"),
    )
    (tmp_dir / "index.html").write_text(index, encoding="utf-8")


def _refresh_site_index(site_dir: Path, run: RunInfo, history: Any) -> Path:
    static = site_dir / "static"
    static.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TEMPLATES / "style.css", static / "style.css")
    index = site_dir / "index.html"
    html = (
        _environment()
        .get_template("index.html")
        .render(
            run=run,
            root="",
            prefix=f"runs/{run.run_id}/",
            pages_prefix=f"runs/{run.pages_from}/",
            history=_with_hrefs(history, "runs/"),
        )
    )
    atomic_write_text(index, html)
    return index


def build_site(
    data_dir: Path,
    *,
    specs: Sequence[PageSpec] | Callable[[], Sequence[PageSpec]],
    stages: Sequence[str] | None = None,
    run_id: str | None = None,
    timings: Sequence[StageTiming] = (),
    run_parameters: Sequence[Parameter] = (),
    now: datetime | None = None,
    strict: bool = False,
    on_page: Callable[[Page], None] | None = None,
    reuse_unchanged: bool = False,
) -> SiteBuild:
    """Build one run's pages under ``DATA/site/runs/<run_id>`` and refresh ``DATA/site/index.html``.

    ``specs`` are the pages in the order the run lists them (``tracelab report`` passes the
    stage registry's order, :func:`tracelab.flows.registry.report_pages`), or a function that
    returns them: with ``stages`` (ordering the pages) and ``reuse_unchanged``, it is called
    only when the pages are built, so reusing them does not load the page builders.
    A page whose inputs are absent is still written, with a visible "not available in this run"
    note naming the missing files and the command that makes them. With ``strict`` a page
    builder's unexpected error propagates (tests); otherwise the page shows the error.

    With ``reuse_unchanged``, when the fingerprint of the pages' inputs equals the latest run's,
    no page is built: the run records ``pages_from`` and its index links the existing pages.
    Only the pages of the traces the data directory holds are built (:func:`pages_for_data`).
    """
    now = now or datetime.now(UTC)
    started = time.perf_counter()
    site_dir = data_dir / "site"
    runs_dir = site_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_dirs(runs_dir)  # left by killed builds; the caller holds the data lock
    run_id = checked_run_id(run_id) if run_id is not None else new_run_id(site_dir, now)
    final_dir = runs_dir / run_id
    if final_dir.exists():
        # a build killed between the rename of its folder and the index refresh left the index
        # stale: it is refreshed from the runs on disk even though this build is refused
        repaired = refresh_index_from_runs(site_dir)
        note = " (the site index now shows the newest run)" if repaired else ""
        raise TracelabError(f"report run {final_dir} exists already{note}: pick another --run-id")
    code = reports_code_fingerprint()
    package_versions = versions()
    present = traces_present(data_dir)
    listed, left_out = _listed_pages(runs_dir, specs, stages, present)
    prior = (
        _unchanged_pages(runs_dir, data_dir, listed, code, package_versions)
        if reuse_unchanged and listed is not None
        else None
    )
    tmp_dir = runs_dir / f".{run_id}.tmp"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    tmp_dir.mkdir(parents=True)
    if prior is None or listed is None:
        built, left_out = pages_for_data(specs() if callable(specs) else specs, present)
        shown = _built_pages(
            built,
            data_dir,
            tmp_dir,
            run_id,
            lambda used: pages_fingerprint(data_dir, built, used, code, package_versions),
            strict=strict,
            on_page=on_page,
        )
    else:
        shown = _reused_pages(listed, prior)
        left_out = prior.left_out
    status = "unchanged" if shown.reused else "ok"
    report = StageTiming("report", "all", status, time.perf_counter() - started, shown.note)
    all_timings = (*(tuple(timings) or recorded_timings(data_dir)), report)
    run = replace(
        _run_info(data_dir, run_id, now, shown, all_timings, run_parameters, package_versions, ""),
        params_file=_copy_params(data_dir, tmp_dir),
        pages_left_out=left_out,
    )
    history = _history(runs_dir, extra=run)
    _write_run_dir(tmp_dir, run, shown, history)
    tmp_dir.replace(final_dir)
    index = _refresh_site_index(site_dir, run, history)
    return SiteBuild(run_id, final_dir, index, shown.pages, shown.pages_from, report)


def _unchanged_pages(
    runs_dir: Path,
    data_dir: Path,
    specs: Sequence[PageSpec],
    code: str,
    package_versions: dict[str, str],
) -> _BuiltPages | None:
    """The latest run's pages when they are still on disk and their inputs are unchanged.

    Only the latest run is compared (inputs that went A → B → A rebuild), and a run whose page
    files were deleted, or that had a page fail, is never reused.
    """
    latest = _latest_run(runs_dir)
    if latest is None or not latest.fingerprint:
        return None
    if [link.slug for link in latest.links] != [s.slug for s in specs]:
        return None
    origin = runs_dir / latest.run_id
    if not all((origin / link.file).is_file() for link in latest.links):
        return None
    now = pages_fingerprint(data_dir, specs, latest.inputs, code, package_versions)
    return latest if now == latest.fingerprint else None


def _listed_pages(
    runs_dir: Path,
    specs: Sequence[PageSpec] | Callable[[], Sequence[PageSpec]],
    stages: Sequence[str] | None,
    present: tuple[str, ...],
) -> tuple[tuple[PageSpec, ...] | None, dict[str, int]]:
    """The pages this run would show (the latest run's, recorded, when ``specs`` is a function
    not to call yet; None when they may differ) and the pages of absent traces."""
    if callable(specs):
        return _recorded_specs(runs_dir, stages, present), {}
    return pages_for_data(specs, present)


def _recorded_specs(
    runs_dir: Path, stages: Sequence[str] | None, present: tuple[str, ...]
) -> tuple[PageSpec, ...] | None:
    """The pages the latest run showed, as specs without builders, when it saw the same traces
    and showed them in the order of ``stages``; else None. Enough to tell whether the pages would
    come out the same: the reports code that declares the real ones (each page its stage) is
    part of the fingerprint they are compared by."""
    latest = _latest_run(runs_dir)
    if stages is None or latest is None or latest.traces != present:
        return None
    if not all(p.stage for p in latest.links):
        return None  # recorded before run.json kept each page's stage
    recorded = tuple(
        PageSpec(p.slug, p.title, p.trace, p.stage, p.sources, "", _only_reused)
        for p in latest.links
    )
    rank = {name: i for i, name in enumerate(stages)}
    if any(p.pipeline_stage not in rank for p in recorded):
        return None
    ranks = [rank[p.pipeline_stage] for p in recorded]
    return recorded if ranks == sorted(ranks) else None


def _only_reused(ctx: PageContext) -> Sequence[Any]:
    raise TracelabError("a page recorded by an earlier run is reused, never built again")


def _latest_run(runs_dir: Path) -> _BuiltPages | None:
    """The pages the newest finished run shows (built by it or reused by it)."""
    docs: list[dict[str, Any]] = []
    for path in runs_dir.glob(f"*/{RUN_FILE}"):
        if path.parent.name.startswith("."):
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("run_id"), str):
            docs.append(doc)
    if not docs:
        return None
    doc = max(docs, key=lambda d: (str(d.get("created_at", "")), d["run_id"]))
    try:
        return _BuiltPages(
            run_id=str(doc.get("pages_from") or doc["run_id"]),
            fingerprint=str(doc.get("pages_fingerprint", "")),
            inputs=tuple(str(p) for p in doc.get("page_inputs", [])),
            traces=tuple(str(t) for t in doc.get("traces", [])),
            left_out={str(k): int(v) for k, v in doc.get("pages_left_out", {}).items()},
            links=tuple(
                PageLink(
                    slug=str(p["slug"]),
                    title=str(p["title"]),
                    trace=str(p["trace"]),
                    file=str(p["file"]),
                    unavailable=str(p.get("unavailable", "")),
                    headline=str(p.get("headline", "")),
                    condition=str(p.get("condition", "")),
                    stage=str(p.get("stage", "")),
                    sources=tuple(str(s) for s in p.get("sources", ())),
                )
                for p in doc.get("pages", [])
            ),
        )
    except (KeyError, TypeError, AttributeError):
        return None


def _with_hrefs(history: list[dict[str, Any]], runs: str) -> list[dict[str, Any]]:
    """History rows with links to each run's index and to the run whose pages it shows."""
    return [
        h
        | {
            "href": f"{runs}{h['run_id']}/index.html",
            "from_href": f"{runs}{h['pages_from']}/index.html",
        }
        for h in history
    ]


def _page(
    spec: PageSpec, data_dir: Path, run_dir: Path, *, strict: bool
) -> tuple[Page, tuple[str, ...]]:
    """The page and the paths (relative to ``data_dir``) its builder read."""
    base = Page(
        slug=spec.slug, title=spec.title, trace=spec.trace, stage=spec.stage, sources=spec.inputs
    )
    short = _page_shortfall(spec, data_dir)
    if short is not None:
        # what the stage needed and found, instead of figures over no data
        return replace(base, unavailable=f"not enough data: {short[0]}"), short[1]
    missing = [p for p in spec.inputs if not (data_dir / p).exists()]
    if missing:
        reason = f"missing {', '.join(missing)} — run `{spec.command}` to produce it."
        return replace(base, unavailable=reason), ()
    ctx = PageContext(data_dir=data_dir, out_dir=run_dir / spec.slug, trace=spec.trace)
    try:
        sections = tuple(spec.build(ctx))
    except InputsMissing as exc:
        return replace(base, unavailable=f"{exc} — run `{spec.command}`."), tuple(ctx.reads)
    except NotEnoughData as exc:
        shutil.rmtree(ctx.out_dir, ignore_errors=True)
        return replace(base, unavailable=f"not enough data: {exc}"), tuple(ctx.reads)
    except Exception as exc:
        if strict:
            raise
        shutil.rmtree(ctx.out_dir, ignore_errors=True)
        last = traceback.format_exception_only(exc)[-1].strip()
        return replace(base, unavailable=f"{_BUILD_ERROR} ({last})."), tuple(ctx.reads)
    numbers = {f.key: f.value for s in sections for f in s.this_run if isinstance(f, Number)}
    folder = _results_folder(spec)
    notes = read_shortfalls(data_dir / folder)
    recorded, recorded_in = _recorded_headline(spec, data_dir, folder)
    headline, condition = _headline(sections, recorded)
    page = replace(
        base,
        sections=sections,
        numbers=numbers,
        notes=notes,
        attribution=tuple(ctx.attribution),
        headline=headline,
        condition=condition,
    )
    return page, (*ctx.reads, *((recorded_in,) if recorded is not None else ()))


def _recorded_headline(
    spec: PageSpec, data_dir: Path, folder: Path
) -> tuple[tuple[str, str] | None, str]:
    """The (key, condition) the page's stage recorded, and the file it is in: the stage's
    summary.json, or for a page drawn from derived tables its summary mart (an input named
    ``*_summary.parquet``)."""
    for rel in spec.inputs:
        if rel.startswith("derived/") and rel.endswith(SUMMARY_SUFFIX):
            return read_table_headline(data_dir / rel), rel
    return read_headline(data_dir / folder), (folder / SUMMARY_FILE).as_posix()


#: the number each page leads with on the index, by its key, and what the index calls it
HEADLINES = {
    "undocumented_share": "undocumented transitions",
    "total_new_submissions": "new submissions",
    "queue_end": "queue at the window's end",
    "scheduling_median_s": "median scheduling time",
    "production_share_of_used_cpu": "production share of CPU used",
    "share_below_20pct_cpu_change": "windows with CPU change under 20%",
    "median_last": "median inst − avg difference, largest k",
    "inst_slope": "std ~ mean slope (inst)",
    "share_rejected_12": "tasks KS-rejected at Δ = 12",
    "largest_share": "largest cluster",
    "rejection_rate_10": "A-D rejection rate, N = 10",
    "google_task_execution_time_shape": "execution-time Gamma shape",
    "calibration_rows_ok": "statistics within tolerance",
    "calibration_rows_real": "statistics on real files (no verdict)",
    "gpa_q_rho_0001": "GPA 0.001 overflow frequency",
    "milp_over_mcb8_pct": "MILP above MCB8",
    "recommended_n": "deployments in the recommended fit",
    "best_utilization": "best utilization meeting the SLA",
    "top_utilization": "highest utilization, SLA not met",
    "improvement_pp_la_binary_oracle": "LA-Binary (oracle) empty hosts over Best Fit",
    "alibaba_task_execution_time_shape": "execution-time Gamma shape",
    "machines_end": "machines up at the end",
    "g2019_instance_execution_time_shape": "execution-time Gamma shape",
    "compare_traces": "traces compared",
    "params_records": "records exported",
}


def _headline(
    sections: Sequence[Section], recorded: tuple[str, str] | None = None
) -> tuple[str, str]:
    """The page's headline number with what it is, and the condition it holds under.

    The number the stage's summary names (``recorded``: its key and condition) when the page
    states it; else the first of :data:`HEADLINES` the page states, or its first computed number
    with the words before it, without a condition.
    """
    numbers = [f for s in sections for f in s.this_run if isinstance(f, Number)]
    if recorded is not None:
        key, condition = recorded
        for n in numbers:
            if n.key == key:
                return f"{HEADLINES.get(key, key.replace('_', ' '))}: {n.text}", condition
    for n in numbers:
        if n.key in HEADLINES:
            return f"{HEADLINES[n.key]}: {n.text}", ""
    for section in sections:
        words = ""
        for frag in section.this_run:
            if isinstance(frag, Number):
                lead = words.rstrip(" :,(").split(". ")[-1].strip()
                text = f"{lead}: {frag.text}" if lead else f"{section.title}: {frag.text}"
                return text, ""
            words += frag
    return "", ""


def _results_folder(spec: PageSpec) -> Path:
    """``results/<trace>/<stage>`` of the page (``statistics/variability``: its ``variability``)."""
    return Path(stage_results(spec.stage.split("/")[-1]).relative(spec.trace))


def _page_shortfall(spec: PageSpec, data_dir: Path) -> tuple[str, tuple[str, ...]] | None:
    """Why the page's stage had too little data to draw anything, and the files that say so.

    The stage's own record first (a stage that did not run); then a derived table the page
    draws that has no rows, with what the lake tables behind it hold.
    """
    folder = _results_folder(spec)
    recorded = read_shortfall(data_dir / folder)
    if recorded is not None:
        return recorded.text, (f"{folder.as_posix()}/summary.json",)
    for rel in spec.inputs:
        if rel.startswith("derived/") and rel.endswith(".parquet"):
            empty = derived_shortfall(data_dir, spec.trace, Path(rel).stem, spec.title)
            if empty is not None:
                return empty.text, (rel, f"lake/{spec.trace}/_manifest.parquet")
    return None


def refresh_index_from_runs(site_dir: Path) -> bool:
    """Rewrite ``site/index.html`` for the newest finished run on disk; False when there is none
    (or its ``run.json`` cannot be read)."""
    runs_dir = site_dir / "runs"
    docs = []
    for path in runs_dir.glob(f"*/{RUN_FILE}"):
        if path.parent.name.startswith("."):
            continue
        try:
            docs.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    docs = [d for d in docs if isinstance(d, dict) and isinstance(d.get("run_id"), str)]
    if not docs:
        return False
    newest = max(docs, key=lambda d: (str(d.get("created_at", "")), d["run_id"]))
    try:
        run = _run_info_from_json(newest)
    except (KeyError, TypeError, ValueError):
        return False
    _refresh_site_index(site_dir, run, _history(runs_dir, extra=run))
    return True


def _run_info_from_json(doc: dict[str, Any]) -> RunInfo:
    """The :class:`RunInfo` a ``run.json`` was written from (``asdict`` inverted)."""
    inputs = {
        trace: TraceInputs(
            tables=tuple(TableRows(**t) for t in v["tables"]),
            files=tuple(InputFile(**f) for f in v["files"]),
        )
        for trace, v in doc.get("inputs", {}).items()
    }
    return RunInfo(
        run_id=doc["run_id"],
        created_at=doc["created_at"],
        traces=tuple(doc["traces"]),
        pages=tuple(
            PageLink(**{**p, "sources": tuple(p.get("sources", ()))}) for p in doc["pages"]
        ),
        timings=tuple(StageTiming(**t) for t in doc["timings"]),
        parameters=tuple(Parameter(**x) for x in doc["parameters"]),
        versions=dict(doc["versions"]),
        inputs=inputs,
        params_file=doc.get("params_file", ""),
        pages_from=doc.get("pages_from", ""),
        pages_fingerprint=doc.get("pages_fingerprint", ""),
        page_inputs=tuple(doc.get("page_inputs", ())),
        sources=dict(doc.get("sources", {})),
        pages_left_out={str(k): int(v) for k, v in doc.get("pages_left_out", {}).items()},
    )


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
                "pages_from": doc.get("pages_from") or doc["run_id"],
            }
        except (OSError, ValueError, KeyError, TypeError):
            continue
    rows[extra.run_id] = {
        "run_id": extra.run_id,
        "created_at": extra.created_at,
        "traces": list(extra.traces),
        "pages": len(extra.pages),
        "available": sum(1 for p in extra.pages if not p.unavailable),
        "pages_from": extra.pages_from or extra.run_id,
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
    env.filters["num"] = numfmt.fmt
    env.filters["numbers_in"] = numfmt.fmt_in_text
    env.globals["trace_label"] = trace_label
    env.globals["by_trace"] = pages_by_trace
    return env


def trace_label(trace: str) -> str:
    return "Across traces" if trace == "all" else trace


def pages_by_trace(pages: Sequence[PageLink]) -> list[tuple[str, list[PageLink]]]:
    """The run's pages grouped by trace in the registry's trace order, the cross-trace pages
    last (the index's sections)."""
    order = [*TRACES, "all"]
    groups: dict[str, list[PageLink]] = {}
    for p in pages:
        groups.setdefault(p.trace, []).append(p)
    rank = {t: i for i, t in enumerate(order)}
    return sorted(groups.items(), key=lambda kv: rank.get(kv[0], len(order)))
