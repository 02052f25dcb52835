"""The params document: schema-valid, round-trips through the reader, refuses what it must."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import polars as pl
import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.fitted_params import (
    FittedParameter,
    Interval,
    Quantity,
    write_stage_params,
)
from tracelab.analysis.export.document import (
    SCHEMA_PATH,
    document_sha256,
    load_params,
    params_document,
    params_schema,
    records_sha256,
    write_params_csv,
    write_params_json,
)
from tracelab.flows.cli import main
from tracelab.flows.export import export_params

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

PRIOR = FittedParameter(
    name="core_lifetime_rate_prior",
    distribution="gamma",
    parameters={"shape": Quantity(2.5, ""), "rate": Quantity(40.0, "hour")},
    method="maximum likelihood",
    n=1234,
    stage="priors",
    trace="azure-2017",
    log_likelihood=-12.5,
    ks_distance=0.031,
    ci={"shape": Interval(2.1, 2.9), "rate": Interval(35.0, 45.0)},
    values={"value_unit": "1/hour", "mean": 0.0625},
    notes="hand-made",
)
CENTROIDS = FittedParameter(
    name="kmeans_centroids",
    distribution="empirical",
    parameters={"k": Quantity(2, "")},
    method="k-means, k = 2",
    n=10,
    stage="analysis",
    trace="google-2011",
    values={"centroids": [[0.5, 0.5], [0.9, 0.1]], "shares": [0.3, 0.7]},
)
EXEC = FittedParameter(
    name="execution_time_prior",
    distribution="gamma",
    parameters={"shape": Quantity(0.7, ""), "rate": Quantity(0.01, "1/s")},
    method="maximum likelihood",
    n=99,
    stage="analysis",
    trace="google-2011",
)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    write_stage_params(data / "results" / "azure-2017" / "priors", [PRIOR])
    write_stage_params(data / "results" / "google-2011" / "analysis", [CENTROIDS, EXEC])
    lake = data / "lake" / "azure-2017"
    lake.mkdir(parents=True)
    pl.DataFrame(
        {"path": ["vmtable/vmtable.csv.gz"], "bytes": [10], "checksum": ["sha256:abc"]}
    ).write_parquet(lake / "_manifest.parquet")
    return data


def _doc(data_dir: Path) -> dict[str, object]:
    return params_document(data_dir, created_at=WHEN, version="9.9.9")


def test_document_is_valid_against_the_schema_file(data_dir: Path) -> None:
    doc = _doc(data_dir)
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    jsonschema.Draft202012Validator(params_schema()).validate(doc)
    assert doc["schema_version"] == "1.4.0"
    assert doc["created_at"] == "2026-01-02T03:04:05Z"
    assert doc["traces"] == ["azure-2017", "google-2011"]
    assert doc["sources"] == [
        {"trace": "azure-2017", "path": "vmtable/vmtable.csv.gz", "checksum": "sha256:abc"}
    ]
    # a manifest written before kinds were kept: the export says it does not know
    assert doc["source"] == {
        "kind": "unrecorded",
        "files": [
            {
                "trace": "azure-2017",
                "table": "?",
                "path": "vmtable/vmtable.csv.gz",
                "kind": "",
                "sha256": "",
            }
        ],
    }
    assert [f["path"] for f in doc["stage_files"]] == [
        "results/azure-2017/priors/params.json",
        "results/google-2011/analysis/params.json",
    ]


def test_round_trip_gives_the_same_records(data_dir: Path) -> None:
    path = write_params_json(_doc(data_dir), data_dir / "exports" / "params.json")
    doc = load_params(path)
    assert doc.records == (PRIOR, CENTROIDS, EXEC)
    assert doc.code_version == "9.9.9"
    assert doc.sources[0].checksum == "sha256:abc"
    got = doc.record("azure-2017", "priors", "core_lifetime_rate_prior")
    assert got.parameters["rate"] == Quantity(40.0, "hour")
    assert got.ci["shape"] == Interval(2.1, 2.9)
    with pytest.raises(TracelabError, match="no record azure-2017/priors/nope"):
        doc.record("azure-2017", "priors", "nope")


def _rewrite(path: Path, change: dict[str, object], *, reseal: bool) -> None:
    doc = json.loads(path.read_text())
    doc.update(change)
    if reseal:
        doc["records_sha256"] = records_sha256(doc["records"])
        doc["document_sha256"] = document_sha256(doc)
    path.write_text(json.dumps(doc))


def test_tampered_record_is_refused(data_dir: Path) -> None:
    path = write_params_json(_doc(data_dir), data_dir / "exports" / "params.json")
    doc = json.loads(path.read_text())
    doc["records"][0]["parameters"]["shape"]["value"] = 3.0
    path.write_text(json.dumps(doc))
    with pytest.raises(TracelabError, match="records_sha256 does not match"):
        load_params(path)


def test_schema_invalid_document_is_refused(data_dir: Path) -> None:
    path = write_params_json(_doc(data_dir), data_dir / "exports" / "params.json")
    doc = json.loads(path.read_text())
    doc["records"][0]["n"] = -1
    _rewrite(path, {"records": doc["records"]}, reseal=True)
    with pytest.raises(TracelabError, match="does not match the params schema at records/0/n"):
        load_params(path)


@pytest.mark.parametrize("version", ["0.9.0", "2.0.0", "", "x"])
def test_other_major_versions_are_refused(data_dir: Path, version: str) -> None:
    path = write_params_json(_doc(data_dir), data_dir / "exports" / "params.json")
    _rewrite(path, {"schema_version": version}, reseal=False)
    with pytest.raises(TracelabError, match=r"is not supported \(this code reads 1\.x\)"):
        load_params(path)


def test_newer_minor_version_is_read(data_dir: Path) -> None:
    path = write_params_json(_doc(data_dir), data_dir / "exports" / "params.json")
    _rewrite(path, {"schema_version": "1.7.2"}, reseal=True)
    assert load_params(path).schema_version == "1.7.2"


def test_invalid_document_is_never_written(data_dir: Path) -> None:
    doc = _doc(data_dir)
    doc["records"][0]["ks_distance"] = 7.0  # type: ignore[index]
    doc["records_sha256"] = records_sha256(doc["records"])  # type: ignore[arg-type]
    doc["document_sha256"] = document_sha256(doc)
    target = data_dir / "exports" / "params.json"
    with pytest.raises(TracelabError, match="ks_distance"):
        write_params_json(doc, target)
    assert not target.exists()


def test_missing_or_broken_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TracelabError, match="run `tracelab export` first"):
        load_params(tmp_path / "params.json")
    (tmp_path / "params.json").write_text("{not json")
    with pytest.raises(TracelabError, match="not valid JSON"):
        load_params(tmp_path / "params.json")


def _shipped_schema_named_by(doc: dict[str, object]) -> dict[str, object]:
    """The schema the document's ``$schema`` names, found among the files the package ships."""
    shipped = [json.loads(p.read_text()) for p in SCHEMA_PATH.parent.glob("*schema*.json")]
    (schema,) = [s for s in shipped if s.get("$id") == doc["$schema"]]
    return schema


def test_the_export_names_its_schema_and_validates_against_it(data_dir: Path) -> None:
    path = write_params_json(_doc(data_dir), data_dir / "exports" / "params.json")
    doc = json.loads(path.read_text())
    schema = _shipped_schema_named_by(doc)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    # the schema travels with the document, so a reader of DATA/exports alone can check it;
    # the copy lists the trace values the shipped file leaves to the declarations
    copy = json.loads((path.parent / "params.schema.json").read_text())
    assert copy["$defs"]["trace"]["enum"] == [
        "google-2011",
        "azure-2017",
        "alibaba-2018",
        "google-2019",
        "azure-2019",
    ]
    del copy["$defs"]["trace"]["enum"]
    assert copy == schema
    # counts are JSON integers, not 2.0
    (centroids,) = [r for r in doc["records"] if r["name"] == "kmeans_centroids"]
    assert centroids["parameters"]["k"]["value"] == 2
    assert type(centroids["parameters"]["k"]["value"]) is int
    assert type(centroids["n"]) is int


def test_a_document_naming_another_schema_is_refused(data_dir: Path) -> None:
    path = write_params_json(_doc(data_dir), data_dir / "exports" / "params.json")
    _rewrite(path, {"$schema": "https://example.org/other.json"}, reseal=True)
    with pytest.raises(TracelabError, match=r"\$schema 'https://example.org/other.json'"):
        load_params(path)


def test_csv_is_a_tidy_table_of_parameters_and_arrays_go_to_their_own_file(
    data_dir: Path,
) -> None:
    doc = _doc(data_dir)
    path = write_params_csv(doc, data_dir / "exports" / "params.csv")
    table = pl.read_csv(path)
    assert table.columns == [
        "trace", "stage", "record", "parameter", "value", "unit", "ci_low", "ci_high", "n", "method",
        "source", "input_files", "inputs_sha256",
    ]  # fmt: skip
    # every row says what data it came from: azure-2017's one file, ingested before kinds were
    # kept; google-2011 has no lake in this directory
    listed = hashlib.sha256(b"vmtable/vmtable.csv.gz \n").hexdigest()
    azure = table.filter(pl.col("trace") == "azure-2017")
    assert set(azure.select("source", "input_files", "inputs_sha256").rows()) == {
        ("unrecorded", 1, listed)
    }
    google = table.filter(pl.col("trace") == "google-2011")
    assert set(google.select("source", "input_files", "inputs_sha256").rows()) == {
        ("none", 0, None)
    }
    # one row per fitted parameter: PRIOR's shape and rate, k of the centroids, EXEC's two
    assert table.height == 5
    assert table.select("record", "parameter").is_unique().all()
    rate = table.filter((pl.col("record") == PRIOR.name) & (pl.col("parameter") == "rate"))
    assert rate.select("value", "unit", "ci_low", "ci_high", "n", "method").row(0) == (
        40.0, "hour", 35.0, 45.0, 1234, "maximum likelihood"
    )  # fmt: skip
    # no interval recorded: empty cells, read as nulls
    assert table.filter(pl.col("record") == EXEC.name)["ci_low"].null_count() == 2
    assert table.schema["n"] == pl.Int64
    # no centroid in the table: the values (arrays element by element) are in their own file
    assert "0.9" not in path.read_text()
    values = pl.read_csv(path.with_name("params_values.csv"), schema_overrides={"index": pl.String})
    cells = values.filter(pl.col("field") == "centroids").sort("index")
    assert cells["index"].to_list() == ["0,0", "0,1", "1,0", "1,1"]
    assert [float(v) for v in cells["value"]] == [0.5, 0.5, 0.9, 0.1]
    mean = values.filter((pl.col("record") == PRIOR.name) & (pl.col("field") == "mean"))
    assert float(mean["value"][0]) == 0.0625
    assert mean.select("source", "input_files", "inputs_sha256").row(0) == ("unrecorded", 1, listed)


def test_no_results_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TracelabError, match="run `tracelab priors` or `tracelab statistics` first"):
        params_document(tmp_path)


def test_broken_stage_file_names_the_file(data_dir: Path) -> None:
    broken = data_dir / "results" / "azure-2017" / "other" / "params.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"parameters": [{"name": "x"}]}')
    with pytest.raises(TracelabError, match=r"other/params.json: not a stage params file"):
        params_document(data_dir)


def test_export_params_and_cli(
    prefect_harness: None, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = export_params(data_dir=data_dir)
    assert path == data_dir / "exports" / "params.json"
    assert load_params(path).records == (PRIOR, CENTROIDS, EXEC)
    out = data_dir / "elsewhere.csv"
    assert main(["export", "--data", str(data_dir), "--format", "csv", "--out", str(out)]) == 0
    assert out.read_text().startswith("trace,stage,record,parameter,value,unit,")
    assert (data_dir / "elsewhere_values.csv").is_file()
    assert "wrote" in capsys.readouterr().out
    (data_dir / "none").mkdir()  # exists, but holds no stage results
    assert main(["export", "--data", str(data_dir / "none")]) == 1
    assert "run `tracelab statistics --trace google-2011`" in capsys.readouterr().err


@pytest.mark.parametrize(
    "change",
    [
        {"code_version": "0.0.1"},
        {"traces": ["google-2011"]},
        {"created_at": "2020-01-01T00:00:00Z"},
        {"schema_version": "1.9.0"},
    ],
)
def test_an_edit_outside_the_records_is_refused(data_dir: Path, change: dict[str, object]) -> None:
    # before: only the records were hashed, so these edits loaded silently
    path = write_params_json(_doc(data_dir), data_dir / "exports" / "params.json")
    _rewrite(path, change, reseal=False)
    with pytest.raises(TracelabError, match="document_sha256 does not match"):
        load_params(path)


def test_an_edited_source_checksum_is_refused(data_dir: Path) -> None:
    path = write_params_json(_doc(data_dir), data_dir / "exports" / "params.json")
    doc = json.loads(path.read_text())
    doc["sources"][0]["checksum"] = "sha256:forged"
    path.write_text(json.dumps(doc))
    with pytest.raises(TracelabError, match="document_sha256 does not match"):
        load_params(path)


def test_the_schema_admits_exactly_the_declared_traces(data_dir: Path) -> None:
    validator = jsonschema.Draft202012Validator(params_schema())
    doc = _doc(data_dir)
    assert validator.is_valid(doc)
    doc["traces"] = ["google-2011", "google-2012"]
    errors = list(validator.iter_errors(doc))
    assert [e.instance for e in errors] == ["google-2012"]
