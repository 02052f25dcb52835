"""`tracelab.open`: tables, SQL and params of a data directory written by hand, and no Prefect."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from repo_paths import REPO

import tracelab
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.fitted_params import FittedParameter, Quantity, write_stage_params
from tracelab.analysis.export.document import params_document, write_params_json
from tracelab.analysis.lake.schemas import TRACES

#: google-2011 machine_events: time in µs (0 = before the window), cpus and memory normalised
MACHINES: dict[str, list[object]] = {
    "time": [0, 0, 700_000_000],
    "machine_id": [1, 2, 3],
    "event_type": [0, 0, 0],
    "cpus": [0.5, 1.0, 0.5],
    "memory": [0.25, 0.5, 0.125],
}


def _lake(root: Path, trace: str, table: str, columns: dict[str, list[object]]) -> None:
    schema = TRACES[trace][table].arrow_schema()
    n = len(next(iter(columns.values())))
    full = {name: columns.get(name, [None] * n) for name in schema.names}
    full |= {"source_file": ["part-0.csv.gz"] * n, "source_row": list(range(n))}
    folder = root / "lake" / trace / table
    folder.mkdir(parents=True)
    pq.write_table(pa.table(full, schema=schema), folder / "part-00000.parquet")


def _record(name: str, distribution: str, **parameters: float | None) -> FittedParameter:
    return FittedParameter(
        name=name,
        distribution=distribution,
        parameters={k: Quantity(v, "") for k, v in parameters.items()},  # type: ignore[arg-type]
        method="by hand",
        n=10,
        stage="priors",
        trace="azure-2017",
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """google-2011 and google-2019 machine_events (the same name in two traces), one derived and
    one result table, and a params export with a Gamma, an exponential, a Poisson and a constant."""
    root = tmp_path_factory.mktemp("api")
    _lake(root, "google-2011", "machine_events", MACHINES)
    _lake(
        root,
        "google-2019",
        "machine_events",
        {"time": [0], "machine_id": [9], "type": [1], "capacity_cpus": [0.5]},
    )
    (root / "derived" / "google-2011").mkdir(parents=True)
    pl.DataFrame({"priority": [0, 9], "n": [5, 7]}).write_parquet(
        root / "derived/google-2011/agg_usage_by_priority.parquet"
    )
    stage = root / "results" / "azure-2017" / "priors"
    stage.mkdir(parents=True)
    pl.DataFrame({"k": [16]}).write_parquet(stage / "priors.parquet")
    write_stage_params(
        stage,
        [
            _record("lifetime", "gamma", shape=2.0, rate=0.5),
            _record("shutdown", "exponential", rate=0.25),
            _record("arrivals", "poisson", rate=3.0),
            _record("alpha", "constant", alpha=0.5),
            _record("failed", "gamma", shape=None, rate=0.5),
        ],
    )
    doc = params_document(root, created_at=datetime(2026, 1, 2, tzinfo=UTC), version="0.1.0")
    write_params_json(doc, root / "exports" / "params.json")
    return root


def test_traces_and_table_names(data: Path) -> None:
    d = tracelab.open(data)
    assert d.traces == ("google-2011", "azure-2017", "google-2019")
    assert d.tables("google-2011") == ["machine_events", "agg_usage_by_priority"]
    assert d.tables("azure-2017") == ["priors_priors"]
    with pytest.raises(TracelabError, match="no tables of trace 'alibaba-2018'"):
        d.tables("alibaba-2018")


def test_table_is_a_lazy_frame_over_the_parquet(data: Path) -> None:
    d = tracelab.open(str(data))
    lf = d.table("machine_events", trace="google-2011")
    assert isinstance(lf, pl.LazyFrame)
    # 0.5 + 1.0 + 0.5 cores of the three machines
    assert lf.select(pl.col("cpus").sum()).collect().item() == 2.0
    assert d.table("machine_events", trace="google-2019").collect()["machine_id"].to_list() == [9]
    assert d.table("agg_usage_by_priority").collect()["n"].to_list() == [5, 7]
    assert d.table("priors_priors").collect().item() == 16


def test_table_errors_name_the_fix(data: Path) -> None:
    d = tracelab.open(data)
    with pytest.raises(TracelabError, match="in traces google-2011, google-2019: pass trace="):
        d.table("machine_events")
    with pytest.raises(TracelabError, match="did you mean agg_usage_by_priority"):
        d.table("agg_usage_by_priorty")
    with pytest.raises(TracelabError, match="no table 'task_events'"):
        d.table("task_events", trace="google-2011")
    with pytest.raises(TracelabError, match="no such data directory"):
        tracelab.open(data / "absent")


def test_sql_reads_views_and_writes_nothing(data: Path) -> None:
    d = tracelab.open(data)
    before = sorted(p.relative_to(data) for p in data.rglob("*"))
    out = d.sql("select count(*) as n, sum(memory) as mem from machine_events")
    assert isinstance(out, pl.DataFrame)
    assert out.rows() == [(3, 0.875)]
    # the lake view's TIMESTAMP column counts from the window start (600 s); 0 = before it
    ts = d.sql("select time_ts from machine_events order by machine_id")["time_ts"].to_list()
    assert ts[:2] == [None, None]
    assert ts[2] == datetime(1970, 1, 1, 0, 1, 40)
    assert d.sql("select machine_id from g2019_machine_events").item() == 9
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == before


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("copy machine_events to 'x.csv'", "not COPY"),
        ("create table t as select 1", "not CREATE"),
        ("select * from read_csv('/etc/hostname')", "Permission Error"),
        ("select * from no_such_view", "no_such_view"),
    ],
)
def test_sql_refuses_writes_and_outside_files(data: Path, query: str, message: str) -> None:
    with pytest.raises(TracelabError, match=message):
        tracelab.open(data).sql(query)


def test_params_records_are_scipy_distributions(data: Path) -> None:
    params = tracelab.open(data).params()
    gamma = params.record("azure-2017", "priors", "lifetime").frozen()
    # Gamma(shape 2, rate 0.5): mean 2 / 0.5 = 4, variance 2 / 0.5² = 8
    assert gamma.mean() == pytest.approx(4.0)
    assert gamma.var() == pytest.approx(8.0)
    assert gamma.rvs(size=5, random_state=1).shape == (5,)
    # exponential rate 0.25: mean 4; P(X > 4) = e^-1
    shutdown = params.record("azure-2017", "priors", "shutdown").frozen()
    assert shutdown.sf(4.0) == pytest.approx(0.36787944117144233)
    # Poisson mean 3: P(0) = e^-3
    assert params.record("azure-2017", "priors", "arrivals").frozen().pmf(0) == pytest.approx(
        0.049787068367863944
    )
    with pytest.raises(TracelabError, match="alpha is a constant, not a distribution"):
        params.record("azure-2017", "priors", "alpha").frozen()
    with pytest.raises(TracelabError, match="shape is None, not a positive number"):
        params.record("azure-2017", "priors", "failed").frozen()


def test_params_without_an_export_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(TracelabError, match="run `tracelab export` first"):
        tracelab.open(tmp_path).params()


def test_version_is_the_installed_distributions() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert tracelab.__version__ == project["version"] == metadata.version("tracelab")


def _fresh_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO.parent
    )
    return done.stdout.strip()


def test_import_is_fast_and_nothing_imports_prefect(data: Path) -> None:
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "import tracelab\n"
        "print(time.perf_counter() - t)\n"
        "assert 'prefect' not in sys.modules and 'polars' not in sys.modules\n"
        f"d = tracelab.open({str(data)!r})\n"
        "d.table('agg_usage_by_priority').collect(); d.sql('select 1'); d.params()\n"
        "d.params().record('azure-2017', 'priors', 'lifetime').frozen()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'prefect'))\n"
    )
    # the fastest of three: the machine is shared, and a slow start is not the import's cost
    runs = [_fresh_python(code).splitlines() for _ in range(3)]
    assert all(r[1] == "[]" for r in runs), runs
    assert min(float(r[0]) for r in runs) <= 0.5
