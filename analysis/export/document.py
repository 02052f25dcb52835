"""The one versioned params document (docs/methods.md §4) and its only reader.

``params_document`` gathers every ``DATA/results/<trace>/<stage>/params.json`` written with
:func:`tracelab.analysis.common.fitted_params.write_stage_params` into one document; ``write_params_json`` validates it
against ``analysis/export/params_schema.json`` (which the document names in ``$schema`` by its ``$id``)
and writes it atomically, with a copy of the schema beside it; ``write_params_csv`` writes a tidy
table, one row per fitted parameter, and each record's ``values`` (arrays such as k-means
centroids) to a second long file. Later stages get parameters only through :func:`load_params`, which
refuses another major version, a schema-invalid document, or any edit after the export
(``records_sha256`` covers the records, ``document_sha256`` every other field too).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow.parquet as pq

from tracelab.analysis.common.atomic import atomic_write_text
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.fitted_params import STAGE_PARAMS_FILE, FittedParameter
from tracelab.analysis.lake.provenance import data_source
from tracelab.analysis.traces import TRACE_IDS

#: a new trace adds a trace value (every 1.x document stays valid); 1.4.0: Gamma records carry
#: ``ci.mean`` (bootstrap of shape / rate)
SCHEMA_VERSION = "1.4.0"
SUPPORTED_MAJOR = 1
SCHEMA_PATH = Path(__file__).resolve().parent / "params_schema.json"
MANIFEST_NAME = "_manifest.parquet"
#: the copy of the schema written beside every JSON export
SCHEMA_COPY_NAME = "params.schema.json"

#: the tidy CSV form: one row per fitted parameter of a record
CSV_COLUMNS: tuple[str, ...] = (
    "trace",
    "stage",
    "record",
    "parameter",
    "value",
    "unit",
    "ci_low",
    "ci_high",
    "n",
    "method",
    "source",
    "input_files",
    "inputs_sha256",
)
#: the second CSV: every entry of each record's ``values`` (``index`` locates array elements)
VALUES_COLUMNS: tuple[str, ...] = (
    "trace",
    "stage",
    "record",
    "field",
    "index",
    "value",
    "source",
    "input_files",
    "inputs_sha256",
)


@dataclass(frozen=True)
class SourceFile:
    """One ingested input file of a trace, as the lake manifest records it."""

    trace: str
    path: str
    checksum: str


@dataclass(frozen=True)
class ParamsDocument:
    """The params document as later stages see it."""

    schema_version: str
    code_version: str
    created_at: str
    traces: tuple[str, ...]
    sources: tuple[SourceFile, ...]
    records: tuple[FittedParameter, ...]

    def record(self, trace: str, stage: str, name: str) -> FittedParameter:
        """The one record with this trace, stage and name; a clear error lists what exists."""
        for r in self.records:
            if (r.trace, r.stage, r.name) == (trace, stage, name):
                return r
        known = ", ".join(sorted(f"{r.trace}/{r.stage}/{r.name}" for r in self.records))
        raise TracelabError(
            f"the params document has no record {trace}/{stage}/{name}; it has: {known or 'none'}"
        )

    def number(
        self, trace: str, stage: str, name: str, parameter: str, need: str = "positive"
    ) -> float:
        """One parameter's value when a model can draw from it, else a one-line error.

        ``need`` is ``positive`` (a Gamma's shape and rate, a rate), ``non-negative`` or
        ``finite``. A stage writes a failed fit's NaN as null and the document can be edited
        by hand, so a value is checked where it is used rather than trusted.
        """
        rec = self.record(trace, stage, name)
        if parameter not in rec.parameters:
            raise TracelabError(
                f"params record {name} lacks {parameter}; re-run the stage that fits it "
                "and `tracelab export`"
            )
        value: object = rec.parameters[parameter].value
        if isinstance(value, int | float) and _meets(float(value), need):
            return float(value)
        raise TracelabError(
            f"params record {name}: {parameter} is {value!r}, not a {need} number, so no model "
            "can draw from it; re-run the stage that fits it (on more data) and `tracelab export`"
        )


def _meets(value: float, need: str) -> bool:
    """``value`` is finite and ``need`` (positive, non-negative or finite) holds."""
    if not math.isfinite(value):
        return False
    return need == "finite" or value > 0 or (need == "non-negative" and value == 0)


def params_schema() -> dict[str, Any]:
    """The JSON Schema of the document, its trace values those of the declared traces."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    schema["$defs"]["trace"]["enum"] = list(TRACE_IDS)
    return schema


#: the schema's ``$id``: what a document's ``$schema`` names
SCHEMA_ID: str = str(params_schema()["$id"])


def code_version() -> str:
    """Package version, plus ``+g<commit>`` when the code runs from a git checkout."""
    try:
        version = metadata.version("tracelab")
    except metadata.PackageNotFoundError:
        version = "0+unknown"
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return version
    commit = done.stdout.strip()
    return f"{version}+g{commit}" if done.returncode == 0 and commit else version


def records_sha256(records: list[dict[str, Any]]) -> str:
    """sha256 of the records as canonical JSON (sorted keys, compact separators)."""
    canonical = json.dumps(records, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def document_sha256(doc: dict[str, Any]) -> str:
    """sha256 of the whole document but this hash, as canonical JSON: any edit changes it."""
    rest = {k: v for k, v in doc.items() if k != "document_sha256"}
    canonical = json.dumps(rest, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def stage_param_files(results_dir: Path) -> list[Path]:
    """Every ``<trace>/<stage>/params.json`` under the results directory, sorted."""
    return sorted(results_dir.glob(f"*/*/{STAGE_PARAMS_FILE}"))


def source_files(lake_dir: Path, traces: list[str]) -> list[SourceFile]:
    """The files each trace's lake manifest lists (no manifest: nothing for that trace)."""
    out: list[SourceFile] = []
    for trace in traces:
        manifest = lake_dir / trace / MANIFEST_NAME
        if not manifest.is_file():
            continue
        names = pq.read_schema(manifest).names
        missing = [c for c in ("path", "checksum") if c not in names]
        if missing:
            raise TracelabError(
                f"{manifest}: lacks column(s) {', '.join(missing)}; re-run tracelab ingest"
            )
        table = pq.read_table(manifest, columns=["path", "checksum"])
        for path, checksum in zip(
            table.column("path").to_pylist(), table.column("checksum").to_pylist(), strict=True
        ):
            out.append(SourceFile(trace=trace, path=str(path), checksum=str(checksum)))
    return out


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def params_document(
    data_dir: Path,
    *,
    created_at: datetime | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """The document (plain JSON-ready dict) from every stage's params.json under ``data_dir``."""
    results = data_dir / "results"
    files = stage_param_files(results)
    if not files:
        raise TracelabError(
            f"no stage results in {results} (expected <trace>/<stage>/{STAGE_PARAMS_FILE}); "
            "run `tracelab priors` or `tracelab statistics` first"
        )
    records: list[dict[str, Any]] = []
    for path in files:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            parsed = [FittedParameter.from_dict(d) for d in doc["parameters"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise TracelabError(
                f"{path}: not a stage params file ({exc}); re-run the stage that wrote it"
            ) from None
        records.extend(r.to_dict() for r in parsed)
    traces = sorted({str(r["trace"]) for r in records})
    when = created_at or datetime.now(UTC)
    document: dict[str, Any] = {
        "$schema": SCHEMA_ID,
        "schema_version": SCHEMA_VERSION,
        "code_version": version or code_version(),
        "created_at": when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "traces": traces,
        "sources": [
            {"trace": s.trace, "path": s.path, "checksum": s.checksum}
            for s in source_files(data_dir / "lake", traces)
        ],
        # real or synthetic, per file with its sha256: what every number below comes from
        "source": data_source(data_dir, traces),
        "stage_files": [
            {"path": p.relative_to(data_dir).as_posix(), "sha256": _sha256_file(p)} for p in files
        ],
        "records": records,
        "records_sha256": records_sha256(records),
    }
    document["document_sha256"] = document_sha256(document)
    return document


def validate_params_document(doc: Any, *, where: str = "params document") -> None:
    """Raise :class:`TracelabError` unless ``doc`` is a readable document of major version 1."""
    if not isinstance(doc, dict):
        raise TracelabError(f"{where}: not a JSON object")
    version = doc.get("schema_version")
    major = str(version).split(".", 1)[0] if version is not None else ""
    if major != str(SUPPORTED_MAJOR):
        raise TracelabError(
            f"{where}: schema_version {version!r} is not supported (this code reads "
            f"{SUPPORTED_MAJOR}.x); re-export it with `tracelab export` from this version"
        )
    named = doc.get("$schema", SCHEMA_ID)
    if named != SCHEMA_ID:
        raise TracelabError(
            f"{where}: $schema {named!r} is not the params schema this code ships ({SCHEMA_ID}); "
            "re-run `tracelab export`"
        )
    validator = jsonschema.Draft202012Validator(params_schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        at = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        raise TracelabError(
            f"{where}: does not match the params schema at {at}: {first.message} "
            f"({len(errors)} problem(s)); re-run `tracelab export`"
        )
    if records_sha256(doc["records"]) != doc["records_sha256"]:
        raise TracelabError(
            f"{where}: records_sha256 does not match the records (the document was edited after "
            "export); re-run `tracelab export`"
        )
    if document_sha256(doc) != doc["document_sha256"]:
        raise TracelabError(
            f"{where}: document_sha256 does not match the document (a field was edited after "
            "export); re-run `tracelab export`"
        )


def write_params_json(doc: dict[str, Any], path: Path) -> Path:
    """Validate, then write the document and a copy of its schema beside it, atomically."""
    validate_params_document(doc, where=str(path))
    schema = json.dumps(params_schema(), indent=2, ensure_ascii=False) + "\n"
    atomic_write_text(beside_path(path, "json")[0], schema)
    return atomic_write_text(
        path, json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
    )


def _leaves(value: Any, field: str, index: tuple[int, ...]) -> Iterator[tuple[str, str, Any]]:
    """``(field, index, scalar)`` for every scalar under ``value``: dict keys extend ``field``
    with dots, list positions extend ``index`` (``"2,5"`` = row 2, column 5 of a matrix)."""
    if isinstance(value, dict):
        if not value:
            yield field, ",".join(map(str, index)), None
        for key, inner in value.items():
            yield from _leaves(inner, f"{field}.{key}" if field else str(key), index)
    elif isinstance(value, list):
        if not value:
            yield field, ",".join(map(str, index)), None
        for i, inner in enumerate(value):
            yield from _leaves(inner, field, (*index, i))
    else:
        yield field, ",".join(map(str, index)), value


def trace_inputs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per trace, what a CSV row says of the data behind it (a CSV row cannot hold the file
    list of a whole trace): ``source``, the kind of its input files (``real``, ``synthetic``,
    ``mixed``, or ``unrecorded`` for files ingested before kinds were kept); ``input_files``,
    how many; ``inputs_sha256``, the sha256 of their ``<path> <sha256>`` lines in path order,
    which the document's ``source.files`` reproduce."""
    files: dict[str, list[dict[str, Any]]] = {}
    for f in doc.get("source", {}).get("files", []):
        files.setdefault(str(f["trace"]), []).append(f)
    out: dict[str, dict[str, Any]] = {}
    for trace, group in files.items():
        kinds = {str(f.get("kind") or "unrecorded") for f in group}
        lines = "".join(
            f"{f['path']} {f['sha256']}\n" for f in sorted(group, key=lambda f: f["path"])
        )
        out[trace] = {
            "source": kinds.pop() if len(kinds) == 1 else "mixed",
            "input_files": len(group),
            "inputs_sha256": hashlib.sha256(lines.encode()).hexdigest(),
        }
    return out


_NO_INPUTS = {"source": "none", "input_files": 0, "inputs_sha256": None}


def params_csv_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The tidy table: one row per fitted parameter (``records[].parameters``) with its unit,
    interval (empty when the record has none), sample size, method and the data it came from
    (:func:`trace_inputs`)."""
    inputs = trace_inputs(doc)
    rows: list[dict[str, Any]] = []
    for r in doc["records"]:
        for name, quantity in r["parameters"].items():
            ci = r["ci"].get(name, {})
            rows.append(
                {
                    "trace": r["trace"],
                    "stage": r["stage"],
                    "record": r["name"],
                    "parameter": name,
                    "value": quantity["value"],
                    "unit": quantity["unit"],
                    "ci_low": ci.get("low"),
                    "ci_high": ci.get("high"),
                    "n": r["n"],
                    "method": r["method"],
                    **inputs.get(r["trace"], _NO_INPUTS),
                }
            )
    return rows


def params_values_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Each record's ``values`` (means, counts, centroids, tables) in long form, one row per
    scalar; ``index`` locates an array element (``"2,5"``: row 2, column 5); the data it came
    from as in :func:`params_csv_rows`."""
    inputs = trace_inputs(doc)
    rows: list[dict[str, Any]] = []
    for r in doc["records"]:
        for field, index, value in _leaves(r["values"], "", ()):
            rows.append(
                {
                    "trace": r["trace"],
                    "stage": r["stage"],
                    "record": r["name"],
                    "field": field,
                    "index": index,
                    "value": value,
                    **inputs.get(r["trace"], _NO_INPUTS),
                }
            )
    return rows


def values_csv_path(path: Path) -> Path:
    """Where :func:`write_params_csv` puts the values of ``path``: ``<stem>_values.csv``."""
    return path.with_name(f"{path.stem}_values.csv")


def beside_path(path: Path, fmt: str) -> tuple[Path, str]:
    """The second file a document written to ``path`` in ``fmt`` comes with, and what it is."""
    if fmt == "csv":
        return values_csv_path(path), "values table"
    return path.with_name(SCHEMA_COPY_NAME), "schema copy"


def _csv_text(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row[k] is None else row[k] for k in columns})
    return buf.getvalue()


def write_params_csv(doc: dict[str, Any], path: Path) -> Path:
    """Validate, then write the tidy parameter table to ``path`` and the records' values
    (arrays included) to :func:`values_csv_path`, atomically (empty cell = no value)."""
    validate_params_document(doc, where=str(path))
    atomic_write_text(
        beside_path(path, "csv")[0], _csv_text(VALUES_COLUMNS, params_values_rows(doc))
    )
    return atomic_write_text(path, _csv_text(CSV_COLUMNS, params_csv_rows(doc)))


def load_params(path: Path) -> ParamsDocument:
    """Read and check a params document: the only way later stages get fitted parameters."""
    if not path.is_file():
        raise TracelabError(f"{path}: no params document; run `tracelab export` first")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise TracelabError(f"{path}: not valid JSON ({exc}); re-run `tracelab export`") from None
    validate_params_document(doc, where=str(path))
    return ParamsDocument(
        schema_version=doc["schema_version"],
        code_version=doc["code_version"],
        created_at=doc["created_at"],
        traces=tuple(doc["traces"]),
        sources=tuple(SourceFile(**s) for s in doc["sources"]),
        records=tuple(FittedParameter.from_dict(r) for r in doc["records"]),
    )
