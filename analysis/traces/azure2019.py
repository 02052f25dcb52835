"""Azure Public Dataset V2 (2019): ``vmtable``, ``deployments`` and ``vm_cpu_readings``.

Schema from AzurePublicDatasetV2.md and the publisher's V2 notebook (docs/ingest.md):
times in seconds from the trace start on a 300 s grid over 30 days, as in V1; unlike V1 the
vmtable publishes core count and memory as buckets (``2``, ``4``, ``8``, ``12``, ``24``,
``>24`` cores; ``2``, ``4``, ``8``, ``32``, ``64``, ``>64`` GB), kept as the published strings
here and recoded by ``queries/stg_azure2019__*.sql`` (docs/derive.md says how). Every file is
headerless; the published deployments table has CRLF line ends, which ingest accepts.
"""

from __future__ import annotations

from tracelab.analysis.traces import azure2017
from tracelab.analysis.traces.model import Download, Generator, Table, TimeAxis, TraceSpec, column

ID = "azure-2019"

#: the published vm_cpu_readings are this many numbered files
READING_FILES = 195

#: V1's first nine columns, then core count and memory as bucket labels
VMTABLE = Table(
    ID,
    "vmtable",
    (
        *azure2017.VMTABLE.columns[:9],
        column("vmcorecountbucket", "str", True),
        column("vmmemorybucket", "str", True),
    ),
    "vmtable/*.csv*",
    at_root=True,
)

DEPLOYMENTS = Table(
    ID,
    "deployments",
    (column("deploymentid", "str", True), column("deploymentsize", "int", True)),
    "deployments/*.csv*",
    at_root=True,
)

VM_CPU_READINGS = Table(
    ID,
    "vm_cpu_readings",
    (
        column("timestamp", "int", True),
        column("vmid", "str", True),
        column("mincpu", "float", True, "min cpu"),
        column("maxcpu", "float", True, "max cpu"),
        column("avgcpu", "float", True, "avg cpu"),
    ),
    "vm_cpu_readings/*.csv*",
)


def _published(path: str) -> tuple[str, str]:
    # trace_data/<table>/<file> is stored as <table>/<file> under the raw root
    return f"trace_data/{path}", path


SPEC = TraceSpec(
    id=ID,
    title="Azure Public Dataset V2 (2019)",
    tables=(VMTABLE, DEPLOYMENTS, VM_CPU_READINGS),
    time=TimeAxis(per_second=1),
    generator=Generator("tracelab.analysis.synthetic.azure2019:generate_azure_2019"),
    # AzurePublicDatasetLinksV2.txt; Azure publishes no checksums, so only lengths are checked
    download=Download(
        "https://azurepublicdatasettraces.blob.core.windows.net/azurepublicdatasetv2/",
        files=(
            _published("vmtable/vmtable.csv.gz"),
            _published("deployments/deployments.csv.gz"),
            *(
                _published(f"vm_cpu_readings/vm_cpu_readings-file-{i}-of-{READING_FILES}.csv.gz")
                for i in range(1, READING_FILES + 1)
            ),
        ),
    ),
    # vm_cpu_readings/vm_cpu_readings-file-N-of-195.csv.gz: the readings are numbered files
    raw_layout="<table>/<table>*.csv.gz",
    # V1 has tables of the same names, and both derive the shared Azure marts
    view_prefix="azure2019_",
    stages=("derive", "priors", "export"),
    wrong_shape_hint=" — is this the original headerless V2 table?",
    not_comparable=(
        "like V1's, its VM table has one row per VM (created, deleted, size buckets, a CPU "
        "utilisation summary) and no life-cycle events: no submission, schedule or terminal "
        "outcome, no queue and no machine events"
    ),
)
