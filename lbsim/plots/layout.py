"""Making a figure fit its canvas, and checking that it does.

:func:`fit_titles` wraps every title (the figure's and each axes') that is wider than the room it
has: the figure's width for the figure title, the axes' width for an axes title. Layout is
matplotlib's constrained layout (:func:`lbsim.plots.style.new_figure`), which then makes room for
the extra lines and for legends placed beside the axes.

:func:`figure_problems` is the reviewer's check, run by the tests on every figure lbsim draws:

* clipped text: every visible text (titles, axis and tick labels, legend entries, annotations)
  lies inside the figure;
* a non-negative quantity drawn below zero: on an axis whose label names one
  (:data:`NONNEGATIVE_LABEL`: seconds, samples, samples/s, ratios, fractions), neither
  the visible range of a linear axis nor any drawn value (lines, bars, error bars) goes below zero.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import numpy as np

# Axis labels of quantities that cannot be negative (every quantity lbsim plots on a value axis).
# (Staleness is a discrete category axis: its bars are centred on 0, 1, 2, ... and are not checked.)
NONNEGATIVE_LABEL = re.compile(r"\((s|samples|samples/s|throughput ratio|fraction)\)|^fraction ")
_TOL_PX = 1.0


def _wrap(text: Any, avail_px: float, renderer: Any) -> bool:
    """Re-wrap ``text`` (a matplotlib Text) so its lines fit in ``avail_px``; True if it changed."""
    if not text.get_visible() or not text.get_text():
        return False
    width = text.get_window_extent(renderer).width
    if width <= avail_px:
        return False
    raw = " ".join(line.strip() for line in text.get_text().split("\n"))
    longest = max(len(line) for line in text.get_text().split("\n"))
    chars = max(12, int(longest * avail_px / width * 0.95))
    wrapped = textwrap.fill(raw, chars, break_on_hyphens=False)
    if wrapped == text.get_text():
        return False
    text.set_text(wrapped)
    return True


def fit_titles(fig: Any, *, rounds: int = 4) -> Any:
    """Wrap the figure's and the axes' titles until each fits its room, then freeze the layout; returns ``fig``.

    Once the titles fit, constrained layout has placed every axes for the text the figure holds, and
    the layout engine is switched off (matplotlib's "freeze the layout": positions are figure
    fractions, so they hold at any dpi): saving the figure, twice, and checking it then draw it
    without laying it out again each time.
    """
    for _ in range(rounds):
        _draw_if_stale(fig)  # layout and text sizes, no pixels
        renderer = fig.canvas.get_renderer()
        fig_w = fig.bbox.width
        changed = False
        suptitle = getattr(fig, "_suptitle", None)
        if suptitle is not None:
            changed |= _wrap(suptitle, fig_w - 8, renderer)
        for ax in fig.axes:
            room = max(ax.get_window_extent(renderer).width, 0.3 * fig_w)
            for title in (ax.title, ax._left_title, ax._right_title):  # noqa: SLF001 — matplotlib's own title slots
                changed |= _wrap(title, min(room, fig_w - 8), renderer)
        if not changed:
            fig.set_layout_engine(None)
            break
    return fig


def _draw_if_stale(fig: Any) -> None:
    """Lay out and measure ``fig`` (a draw without pixels) unless nothing changed since its last draw."""
    if fig.stale:
        fig.draw_without_rendering()


def _texts(fig: Any) -> list[Any]:
    out = []
    if getattr(fig, "_suptitle", None) is not None:
        out.append(fig._suptitle)  # noqa: SLF001
    for ax in fig.axes:
        out += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]  # noqa: SLF001
        for axis in (ax.xaxis, ax.yaxis):  # the ticks drawn (inside the view), not every tick the locator made
            out += [lab for tick in axis._update_ticks() for lab in (tick.label1, tick.label2)]  # noqa: SLF001
        out += list(ax.texts)
        legend = ax.get_legend()
        if legend is not None:
            out += [*legend.get_texts(), legend.get_title()]
    for legend in fig.legends:
        out += [*legend.get_texts(), legend.get_title()]
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def _values(ax: Any, axis: str) -> list[float]:
    """Every drawn data value of ``ax`` along ``axis`` ('x' or 'y'): lines, bar tops and bottoms, error bars."""
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.patches import Rectangle

    k = 0 if axis == "x" else 1
    vals: list[float] = []
    for line in ax.get_lines():
        data = line.get_xdata() if axis == "x" else line.get_ydata()
        vals += [float(v) for v in np.asarray(data, dtype=float).ravel() if np.isfinite(v)]
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and (patch.get_width() or patch.get_height()):
            lo = patch.get_x() if axis == "x" else patch.get_y()
            size = patch.get_width() if axis == "x" else patch.get_height()
            base = patch.get_y() if axis == "x" else patch.get_x()
            # a bar standing on the other axis' zero: along this axis it is a category, placed at its centre
            vals += [float(lo + size / 2)] if base == 0 else [float(lo), float(lo + size)]
    for coll in ax.collections:
        if isinstance(coll, LineCollection):
            for seg in coll.get_segments():
                vals += [float(v) for v in np.asarray(seg)[:, k] if np.isfinite(v)]
        elif isinstance(coll, PolyCollection):
            for path in coll.get_paths():
                verts = np.asarray(path.vertices, dtype=float)
                vals += [float(v) for v in verts[:, k] if np.isfinite(v)]
    return vals


def figure_problems(fig: Any, name: str = "figure") -> list[str]:
    """What a reviewer would reject in ``fig``: clipped text, a non-negative quantity below zero."""
    _draw_if_stale(fig)
    renderer = fig.canvas.get_renderer()
    W, H = fig.bbox.width, fig.bbox.height  # noqa: N806
    problems = []
    for text in _texts(fig):
        bb = text.get_window_extent(renderer)
        if bb.x0 < -_TOL_PX or bb.y0 < -_TOL_PX or bb.x1 > W + _TOL_PX or bb.y1 > H + _TOL_PX:
            problems.append(f"{name}: text {text.get_text()!r} is clipped (extent {bb.x0:.0f}..{bb.x1:.0f} x "
                            f"{bb.y0:.0f}..{bb.y1:.0f} px in a {W:.0f} x {H:.0f} figure)")
    for i, ax in enumerate(fig.axes):
        if not ax.has_data():
            continue
        for axis in ("x", "y"):
            label = (ax.get_xlabel() if axis == "x" else ax.get_ylabel()) or _shared_label(ax, axis)
            if not NONNEGATIVE_LABEL.search(label):
                continue
            scale = ax.get_xscale() if axis == "x" else ax.get_yscale()
            lo = min(ax.get_xlim() if axis == "x" else ax.get_ylim())
            if scale == "linear" and lo < -1e-9:
                problems.append(f"{name}: axes {i} shows {label!r} from {lo:.3g}, below zero")
            vals = _values(ax, axis)
            if vals and min(vals) < -1e-9:
                problems.append(f"{name}: axes {i} draws {label!r} down to {min(vals):.3g}, below zero")
    return problems


def _shared_label(ax: Any, axis: str) -> str:
    shared = ax.get_shared_x_axes() if axis == "x" else ax.get_shared_y_axes()
    getter = f"get_{axis}label"
    return next((getattr(s, getter)() for s in shared.get_siblings(ax) if getattr(s, getter)()), "")
