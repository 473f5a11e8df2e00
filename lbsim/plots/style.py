"""Figures without pyplot: the Agg canvas, a fixed colour per scheme and phase, atomic PNG + SVG.

matplotlib is imported here, inside functions, only when a figure is made (the ``plot`` extra:
``pip install "lbsim[plot]"``). Figures are built with the object-oriented API on an explicit
Agg canvas, so no global backend or pyplot state is touched.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lbsim.errors import InputError

SCHEME_ORDER = ("bsp", "asp", "ssp", "dssp", "static", "lbbsp", "elastic_bsp", "wbsp", "loft")
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
PHASE_COLORS = {"fetch": "#8c564b", "compute": "#2ca02c", "wait": "#d62728", "comm": "#1f77b4"}
PHASE_LABELS = {"fetch": "fetch data", "compute": "compute", "wait": "wait", "comm": "communicate"}
FORMATS = ("png", "svg")


def matplotlib_figure_class() -> Any:
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
    base = name.split("(")[0].strip()
    return (SCHEME_ORDER.index(base) if base in SCHEME_ORDER else len(SCHEME_ORDER), name)


def ordered_schemes(names: Sequence[str]) -> list[str]:
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a figure is as readable as any new file
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
        _atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    return paths
