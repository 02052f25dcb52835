"""Matplotlib on the Agg backend: figures saved as PNG next to their page."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt

from tracelab.reports.model import Figure

FloatArray = npt.NDArray[np.float64]

# one size for every figure keeps pages calm; 100 dpi PNG stays small and renders offline
_FIGSIZE = (7.0, 4.0)
_DPI = 100
_MARGINS = {"left": 0.11, "right": 0.9, "bottom": 0.14, "top": 0.92, "wspace": 0.35, "hspace": 0.55}


@contextmanager
def new_axes(
    out: Path,
    name: str,
    alt: str,
    caption: str,
    *,
    ncols: int = 1,
    nrows: int = 1,
    margins: dict[str, float] | None = None,
    size: tuple[float, float] | None = None,
) -> Iterator[tuple[Any, list[Figure]]]:
    """Yield (axes, holder); on exit the figure is saved as ``out/name.png`` and its
    :class:`Figure` record appended to ``holder``.

    Margins are fixed (``margins`` overrides them) rather than computed by ``tight_layout``,
    which draws every figure an extra time and dominated the report's run time.
    """
    width = _FIGSIZE[0] if ncols == 1 else min(3.6 * ncols, 14.0)
    height = _FIGSIZE[1] if nrows == 1 else min(2.6 * nrows, 14.0)
    fig, axes = plt.subplots(nrows, ncols, figsize=size or (width, height), squeeze=False)
    fig.subplots_adjust(**{**_MARGINS, **(margins or {})})
    holder: list[Figure] = []
    try:
        yield (axes[0][0] if ncols == nrows == 1 else axes), holder
        out.mkdir(parents=True, exist_ok=True)
        file = f"{name}.png"
        # no timestamp metadata: the same results give the same bytes
        fig.savefig(out / file, format="png", dpi=_DPI, metadata={"Software": None})
        holder.append(Figure(file=file, alt=alt, caption=caption))
    finally:
        plt.close(fig)


def ecdf(values: FloatArray, max_points: int = 2000) -> tuple[FloatArray, FloatArray]:
    """(x, F(x)) of the empirical CDF, thinned to at most ``max_points`` points."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    if n == 0:
        return x, x
    y = np.arange(1, n + 1, dtype=np.float64) / n
    if n > max_points:
        idx = np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))
        x, y = x[idx], y[idx]
    return x, y
