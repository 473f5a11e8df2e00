"""Figures without pyplot: the Agg canvas, a fixed colour per scheme and phase, atomic PNG + SVG.

matplotlib is imported here, inside functions, only when a figure is made (the ``plot`` extra:
``pip install "lbsim[plot]"``). Figures are built with the object-oriented API on an explicit
Agg canvas, so no global backend or pyplot state is touched.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lbsim.errors import InputError
from lbsim.metrics.writers import atomic_write_bytes

SCHEME_ORDER = ("bsp", "asp", "ssp", "dssp", "static", "lbbsp", "elastic_bsp", "wbsp", "loft")
# Okabe & Ito's colour-blind-safe palette (Color Universal Design): distinguishable under
# protanopia, deuteranopia and tritanopia, and in greyscale by lightness for the phases.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000", "#999999")
PHASE_COLORS = {"fetch": "#999999", "compute": "#0072B2", "wait": "#E69F00", "comm": "#CC79A7"}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")
MAX_TIMELINE_WORKERS = 24  # more workers: a timeline shows the first of each instance type (bounded size and time)
PHASE_LABELS = {"fetch": "fetch data", "compute": "compute", "wait": "wait", "comm": "communicate"}
FORMATS = ("png", "svg")


def matplotlib_figure_class() -> Any:
    """matplotlib's Figure class; InputError naming the plot extra if matplotlib is missing."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise InputError("plot", 'needs matplotlib: pip install "lbsim[plot]"') from None
    return Figure


def new_figure(width_in: float, height_in: float, nrows: int = 1, ncols: int = 1, **kw: Any) -> tuple[Any, Any]:
    """A figure on an Agg canvas and its axes (``squeeze=False``: always a 2-D array)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = matplotlib_figure_class()(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def scheme_sort_key(name: str) -> tuple[int, str]:
    """Sort key: the schemes in their usual order, then by name."""
    base = name.split("(")[0].strip()
    return (SCHEME_ORDER.index(base) if base in SCHEME_ORDER else len(SCHEME_ORDER), name)


def ordered_schemes(names: Sequence[str]) -> list[str]:
    """The distinct scheme names in their usual order."""
    return sorted(dict.fromkeys(names), key=scheme_sort_key)


def scheme_colors(names: Sequence[str]) -> dict[str, str]:
    """A stable colour per scheme: the known schemes always get the same one."""
    colors = {}
    extra = 0
    for name in ordered_schemes(names):
        if name in SCHEME_ORDER:
            colors[name] = PALETTE[SCHEME_ORDER.index(name) % len(PALETTE)]
        else:
            colors[name] = PALETTE[(len(SCHEME_ORDER) + extra) % len(PALETTE)]
            extra += 1
    return colors


def save_figure(fig: Any, out: Path, name: str, *, dpi: int = 150) -> list[Path]:
    """``out/name.png`` and ``out/name.svg``, each written atomically; reproducible bytes."""
    import matplotlib

    paths = []
    for fmt in FORMATS:
        buf = io.BytesIO()
        meta = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
        with matplotlib.rc_context({"svg.hashsalt": "lbsim", "svg.fonttype": "none"}):
            fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
        path = out / f"{name}.{fmt}"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    return paths
