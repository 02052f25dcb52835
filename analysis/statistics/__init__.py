"""The statistics of the google-2011 trace (docs/methods.md §2): one module per analysis.

This package's ``__init__`` stays light: the registry reads :data:`ANALYSES` for ``tracelab --help``.
"""

#: the analysis sub-stages of ``tracelab statistics``, in order; each writes ``results/<trace>/<name>``
ANALYSES: tuple[str, ...] = (
    "inst_vs_avg",
    "variability",
    "time_invariance",
    "clustering",
    "gaussian_sums",
    "gamma_fits",
)
