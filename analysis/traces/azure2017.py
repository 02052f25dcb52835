"""Azure Public Dataset V1 (2017): the ``vmtable``, the one table tracelab reads.

Schema from AzurePublicDatasetV1.md (docs/methods.md §0.2): times in seconds from the trace
start on a 300 s grid; a VM still alive at the end has ``vmdeleted`` at the last grid point.
The published table is one headerless ``vmtable.csv.gz``; part files in ``vmtable/`` are read too.
"""

from __future__ import annotations

from tracelab.analysis.traces.model import Download, Generator, Table, TimeAxis, TraceSpec, column

ID = "azure-2017"

#: s; vmdeleted at or past this means alive at the end of the 30 days (right-censored)
CENSORED_VMDELETED_S = 2_591_700

VMTABLE = Table(
    ID,
    "vmtable",
    (
        column("vmid", "str", True),
        column("subscriptionid", "str", True),
        column("deploymentid", "str", True),
        column("vmcreated", "int", True),
        column("vmdeleted", "int", True),
        column("maxcpu", "float", True),
        column("avgcpu", "float", True),
        column("p95maxcpu", "float", True),
        column("vmcategory", "str", True),
        column("vmcorecount", "int", True),
        column("vmmemory", "float", True),
    ),
    "vmtable/*.csv*",
    at_root=True,
)

SPEC = TraceSpec(
    id=ID,
    title="Azure Public Dataset V1 (2017)",
    tables=(VMTABLE,),
    time=TimeAxis(per_second=1),
    generator=Generator(
        "tracelab.analysis.synthetic.azure2017:generate_azure_2017",
        frozenset({"target_mb", "progress"}),
    ),
    # AzurePublicDatasetV1Links.txt; Azure publishes no checksums, so only lengths are checked
    download=Download(
        "https://azurepublicdatasettraces.blob.core.windows.net/azurepublicdataset/",
        files=(("trace_data/vmtable/vmtable.csv.gz", "vmtable.csv.gz"),),
    ),
    raw_layout="vmtable.csv.gz",
    derived_infix="azure",
    stages=("derive", "priors", "export", "admission", "placement"),
    wrong_shape_hint=" — is this the original headerless vmtable?",
    not_comparable=(
        "its VM table has one row per VM (created, deleted, size, a CPU utilisation summary) "
        "and no life-cycle events: no submission, schedule or terminal outcome, hence no queue "
        "or scheduling delay, and no machine events; its VM lifetimes are on the azure-priors "
        "page"
    ),
)
