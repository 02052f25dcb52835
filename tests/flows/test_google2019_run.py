"""`tracelab run --trace google-2019` end to end with its priors: in a fresh data
directory with no raw data (the generator's tiny sample) the priors are fitted, exported under
the versioned schema naming the trace, and shown on their page (chromium); on the real trimmed
machine_events shard in ``tests/data/google-2019`` fit is not run and the run, the command and the
page say what it lacked."""

from __future__ import annotations

import gzip
import json
import re
from html import unescape
from pathlib import Path

import jsonschema
import numpy as np
import polars as pl
import pytest
from browser.chromium import CHROMIUM, render
from browser.html import read_refs
from cli_helpers import tracelab_output
from repo_paths import TESTS
from scipy import stats

from tracelab.analysis.export.document import SCHEMA_PATH, ParamsDocument, load_params
from tracelab.reports.numfmt import fmt, fmt_ci

TRACE = "google-2019"
EXCERPT = TESTS / "data" / TRACE
EXECUTION = "g2019_instance_execution_time"
RECORDS = [EXECUTION, "g2019_instance_inst_mean", "g2019_instance_inst_std"]
#: the real shard's machine_events rows (tests/data/google-2019/PROVENANCE.md)
SHARD_ROWS = 15_407


@pytest.fixture(scope="module")
def generated_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("g2019-generated") / "data"
    rc, out = tracelab_output("run", "--data", str(data), "--trace", TRACE, "--scale", "tiny")
    assert rc == 0, out
    return data


@pytest.fixture(scope="module")
def excerpt_run(
    prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    data = tmp_path_factory.mktemp("g2019-excerpt") / "data"
    rc, out = tracelab_output("run", "--data", str(data), "--trace", TRACE, "--raw", str(EXCERPT))
    assert rc == 0, out
    return data, out


def _exported(data: Path) -> ParamsDocument:
    return load_params(data / "exports" / "params.json")  # validates against the schema


def test_the_export_names_google_2019_in_every_record(generated_run: Path) -> None:
    raw = json.loads((generated_run / "exports" / "params.json").read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(raw)
    doc = _exported(generated_run)
    assert doc.schema_version == "1.4.0"
    assert doc.traces == (TRACE,)
    assert [r.name for r in doc.records] == RECORDS
    assert {(r.trace, r.stage) for r in doc.records} == {(TRACE, "priors")}
    assert {r.parameters["rate"].unit for r in doc.records} == {"1/s", "1/NCU"}


def test_the_exported_execution_prior_is_a_fit_of_the_generated_finished_runs(
    generated_run: Path,
) -> None:
    # from TRUTH.json, not the lake: the first runs that ended with FINISH (6) in the window,
    # plus the second runs of evicted instances, which TRUTH.json does not time; so the record
    # holds at least the former, and its n is the number of FINISH events
    truth = json.loads((generated_run / "raw" / TRACE / "TRUTH.json").read_text())
    rec = _exported(generated_run).record(TRACE, "priors", EXECUTION)
    assert rec.n == truth["event_counts"]["instance_events"]["6"]
    firsts = [t["duration_s"] for t in truth["instance_truths"] if t["end_type"] == 6]
    assert 0 < len(firsts) <= rec.n
    # the runs are Exponential(3,600 s): a shape near 1 (n ~80 at tiny: SE ~0.14)
    assert abs(rec.parameters["shape"].value - 1.0) < 0.45
    ci = rec.ci["shape"]
    assert ci.low < rec.parameters["shape"].value < ci.high


def test_the_csv_export_has_the_google_2019_rows(generated_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "params.csv"
    rc, text = tracelab_output(
        "export", "--data", str(generated_run), "--format", "csv", "--out", str(out)
    )
    assert rc == 0, text
    mine = pl.read_csv(out).filter(pl.col("trace") == TRACE)
    assert sorted(set(mine["record"])) == sorted(RECORDS)
    assert sorted(mine["parameter"]) == ["rate"] * 3 + ["shape"] * 3


def _page(data: Path) -> Path:
    pages = sorted((data / "site" / "runs").glob("*/google-2019-priors.html"))
    assert pages, "no google-2019-priors page built"
    return pages[-1]


def _text(page: Path) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


def test_the_page_states_the_exported_fits_the_source_and_the_window(generated_run: Path) -> None:
    page = _page(generated_run)
    refs = read_refs(page)
    doc = _exported(generated_run)
    for rec in doc.records:
        assert refs.numbers[f"{rec.name}_shape"] == pytest.approx(rec.parameters["shape"].value)
        assert refs.numbers[f"{rec.name}_rate"] == pytest.approx(rec.parameters["rate"].value)
        assert refs.numbers[f"{rec.name}_n"] == rec.n
    # the generator's window is one day; its runs start after 0 and the last ends before 24 h
    assert 0 < refs.numbers["window_start_h"] < refs.numbers["window_end_h"] <= 24
    text = _text(page)
    assert "synthetic google-2019 sample" in text
    rec = doc.record(TRACE, "priors", EXECUTION)
    ci = rec.ci["shape"]
    assert fmt_ci(rec.parameters["shape"].value, ci.low, ci.high) in text
    # the options come from the stage's record: the run's bootstrap replicates and seed
    assert re.search(r"n_boot\s+200\s+bootstrap replicates", text)
    assert "Not supported: the Azure deployment model's priors" in text
    # the options table lists what this fit reads, none of the Azure fit's
    for azure_only in ("vmtable", "shutdown_cores", "zero_event_probability", "shutdown_min_vms"):
        assert azure_only not in text


@pytest.mark.browser
def test_chromium_renders_the_google_2019_priors_page(generated_run: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not installed (make browser)")
    shown = render(_page(generated_run).as_uri())
    assert not shown.console, shown.console
    assert "Gamma priors of google-2019" in shown.dom
    for name in RECORDS:
        assert f"<td>{name}</td>" in shown.dom
    assert "Parameters of this run" in shown.dom


# ---- the real machine_events shard alone: no instance table, so no prior ----

NEEDS = "priors: needs instance_events rows"


def test_the_run_on_the_real_shard_says_fit_had_no_instance_data(
    excerpt_run: tuple[Path, str],
) -> None:
    data, out = excerpt_run
    lines = [line for line in out.splitlines() if line.strip().startswith("priors ")]
    assert len(lines) == 1, lines
    assert "google-2019  no data" in lines[0]
    assert NEEDS in lines[0]
    assert f"machine_events: {SHARD_ROWS:,} rows from 1 file" in lines[0]
    assert (
        "instance_events: 0 rows ingested, no "
        "instance_events/instance_events-NNNNNNNNNNNN.json.gz file was given" in lines[0]
    )
    summary = json.loads((data / "results" / TRACE / "priors" / "summary.json").read_text())
    assert summary["not_enough_data"]["stage"] == "priors"
    assert not (data / "results" / TRACE / "priors" / "params.json").exists()
    assert not (data / "exports" / "params.json").exists()
    assert "Traceback" not in out


def test_the_priors_page_of_the_real_shard_says_what_it_lacked(
    excerpt_run: tuple[Path, str],
) -> None:
    text = _text(_page(excerpt_run[0]))
    assert f"not enough data: {NEEDS}" in text
    assert "machine_events alone supports no prior of the model" in text


def test_fit_on_the_real_shard_says_so_in_one_line(excerpt_run: tuple[Path, str]) -> None:
    data, _ = excerpt_run
    rc, out = tracelab_output("priors", "--data", str(data), "--trace", TRACE)
    assert rc == 1
    lines = out.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"tracelab priors: error: not run, not enough data: {NEEDS}")
    assert "Traceback" not in out


def test_fit_refuses_the_azure_vmtable_option_on_google_2019(
    generated_run: Path, tmp_path: Path
) -> None:
    vmtable = tmp_path / "vmtable.csv"
    vmtable.write_text("")
    args = ("priors", "--data", str(generated_run), "--trace", TRACE, "--vmtable", str(vmtable))
    rc, out = tracelab_output(*args)
    assert rc != 0
    assert "--vmtable is an azure-2017 option" in out
    assert "Traceback" not in out


def test_an_independent_fit_of_the_exported_sample_matches(generated_run: Path) -> None:
    # the FINISHed incarnations' execution times, read from the derived table by hand
    times = pl.read_parquet(generated_run / "derived" / TRACE / "fct_task_times.parquet")
    x = (
        times.filter((pl.col("terminal_event_type") == 6) & (pl.col("execution_time_s") > 0))[
            "execution_time_s"
        ]
        .to_numpy()
        .astype(np.float64)
    )
    shape, _, scale = stats.gamma.fit(x, floc=0)
    rec = _exported(generated_run).record(TRACE, "priors", EXECUTION)
    assert rec.n == x.size
    assert rec.parameters["shape"].value == pytest.approx(shape, rel=1e-6)
    assert rec.parameters["rate"].value == pytest.approx(1 / scale, rel=1e-6)


# ---- the real shard's machines page: its numbers recomputed from the raw JSON lines ----


def _machines_page(data: Path) -> Path:
    pages = sorted((data / "site" / "runs").glob("*/google-2019-machines.html"))
    assert pages, "no google-2019-machines page built"
    return pages[-1]


def _machines_at_end() -> dict[tuple[float, float] | None, int]:
    """Per capacity (None: unknown), the machines up after each machine's last event, straight
    from the shard's JSON lines in (time, line) order: ADD 1 and UPDATE 3 leave it up with
    that event's capacity (an ADD without one: unknown), REMOVE 2 down."""
    shard = EXCERPT / "machine_events" / "machine_events-000000000000.json.gz"
    with gzip.open(shard, "rt", encoding="utf-8") as fh:
        rows = [(int(r["time"]), i, r) for i, r in enumerate(map(json.loads, fh))]
    state: dict[str, tuple[float, float] | bool | None] = {}
    for _, _, r in sorted(rows, key=lambda t: t[:2]):
        if r["type"] == "2":
            state[r["machine_id"]] = False
        else:
            cap = r.get("capacity")
            state[r["machine_id"]] = (
                (float(cap["cpus"]), float(cap["memory"])) if cap and "cpus" in cap else None
            )
    out: dict[tuple[float, float] | None, int] = {}
    for value in state.values():
        if value is not False:
            key = value if isinstance(value, tuple) else None
            out[key] = out.get(key, 0) + 1
    return out


def test_the_real_shard_gets_a_machines_page(excerpt_run: tuple[Path, str]) -> None:
    page = _machines_page(excerpt_run[0])
    numbers = read_refs(page).numbers
    # PROVENANCE.md's counts (zcat | grep): 3,276 ADDs at time 0, 9,259 ADDs in all, 5,981
    # REMOVEs, 167 UPDATEs
    assert numbers["machines_start"] == 3_276
    assert numbers["machine_adds"] == 9_259 - 3_276
    assert numbers["machine_removes"] == 5_981
    assert numbers["machine_updates"] == 167
    at_end = _machines_at_end()
    assert numbers["machines_end"] == sum(at_end.values())
    assert numbers["without_capacity_end"] == at_end.get(None, 0)
    # the most common capacity at the end heads the table, with its count
    (cpus, memory), count = max(((k, v) for k, v in at_end.items() if k), key=lambda kv: kv[1])
    first = re.search(r"<tbody>\s*<tr><td>(.*?)</td><td>.*?</td><td>(.*?)</td>", page.read_text())
    assert first is not None
    assert first.group(1) == f"{fmt(cpus)} × {fmt(memory)}"
    assert first.group(2) == f"{count:,}"


@pytest.mark.browser
def test_chromium_renders_the_machines_page_with_its_data_files(
    excerpt_run: tuple[Path, str],
) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not installed (make browser)")
    page = _machines_page(excerpt_run[0])
    shown = render(page.as_uri())
    assert not shown.console, shown.console
    assert "Machines and capacity of google-2019" in shown.dom
    csvs = re.findall(r'<a class="data" href="([^"]+\.csv)"', shown.dom)
    assert len(csvs) == len(re.findall(r"<img ", shown.dom)) == 2
    for href in csvs:
        table = pl.read_csv(page.parent / href)
        assert table.height > 0, href
