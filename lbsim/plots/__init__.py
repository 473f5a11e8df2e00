"""Figures a paper would show, from a sweep or a run folder (``lbsim plot DIR``; ``lbsim run --plots``).

Sweep folder (``results.csv`` + ``runs/``): ``throughput`` (per scheme and condition, error bars
over seeds), ``time_to_target`` (with numerics), ``speedup_vs_bsp`` (vs the slowdown factor),
``iteration_cdf`` (per scheme, a panel per slowdown level), ``staleness`` (histograms of the
schemes that have any), ``lbbsp_batches`` and ``timelines`` (for the representative condition),
``accuracy`` (with numerics). Compare folder (``compare.csv`` + a run folder per scheme):
``throughput``, ``phases``, ``iteration_cdf``, ``timelines``, ``staleness``. Run folder:
``iteration_cdf``, ``phases``, ``timeline``, ``batch_sizes``, ``staleness``, ``accuracy`` (the last
three when they say something). See :mod:`lbsim.plots.sweep_figs`, :mod:`lbsim.plots.compare_figs`
and :mod:`lbsim.plots.run_figs`.

Each figure is saved as ``NAME.png`` and ``NAME.svg``, atomically, in ``DIR/plots/`` (or
``out``). matplotlib is needed only here (the ``plot`` extra) and is imported lazily.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lbsim.errors import InputError

PLOTS = "plots"


def figures_for(path: Path, *, timeline_s: float | None = None, x: str | None = None) -> dict[str, Any]:
    """The figures for a sweep or run folder, by name (matplotlib ``Figure`` objects, laid out, not yet saved).

    ``timeline_s``: the seconds a timeline shows (default: the first 20 s, or the whole run if shorter).
    """
    figs = _figures(path, timeline_s=timeline_s, x=x)
    from lbsim.plots.layout import fit_titles

    return {name: fit_titles(fig) for name, fig in figs.items()}


def _figures(path: Path, *, timeline_s: float | None, x: str | None) -> dict[str, Any]:
    from lbsim.plots.data import is_compare_dir, is_run_dir, is_sweep_dir, read_compare, read_run, read_sweep
    from lbsim.plots.style import matplotlib_figure_class

    matplotlib_figure_class()  # a clear error if matplotlib is missing
    if is_sweep_dir(path):
        from lbsim.plots.sweep_figs import sweep_figures

        return sweep_figures(read_sweep(path), timeline_s=timeline_s, x=x)
    if is_compare_dir(path):
        from lbsim.plots.compare_figs import compare_figures

        return compare_figures(read_compare(path), timeline_s=timeline_s)
    if is_run_dir(path):
        from lbsim.plots.run_figs import run_figures

        return run_figures(read_run(path), timeline_s=timeline_s)
    raise InputError(str(path), "not a sweep folder (results.csv, runs/), a compare folder (compare.csv) "
                                "nor a run folder (summary.json, iterations.csv)")


def save_figures(figs: dict[str, Any], out: Path) -> list[Path]:
    """Save every figure as PNG and SVG in ``out``; the paths written."""
    from lbsim.plots.style import save_figure

    paths = []
    for name, fig in figs.items():
        paths += save_figure(fig, out, name)
    return paths


def plot_dir(path: str | Path, *, out: str | Path | None = None, timeline_s: float | None = None,
             x: str | None = None, problems: list[str] | None = None) -> list[Path]:
    """Make and save every figure for ``path``; returns the files written.

    Each figure is checked as a reviewer would (:func:`lbsim.plots.layout.figure_problems`: clipped
    text, a non-negative quantity below zero) before it is saved; what is found is appended to
    ``problems`` (``lbsim plot`` prints it as warnings).
    """
    p = Path(path)
    if not p.is_dir():
        raise InputError(str(path), "no such folder; give a sweep output (lbsim sweep --out) or a run output (lbsim run --out)")
    if timeline_s is not None and timeline_s <= 0:
        raise InputError("--timeline-s", f"must be > 0, got {timeline_s:g}")
    figs = figures_for(p, timeline_s=timeline_s, x=x)
    target = Path(out) if out is not None else p / PLOTS
    try:  # a folder that cannot be written is the user's mistake (exit 2), found before any figure is saved
        target.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError("--out" if out is not None else str(path), f"cannot write figures to {target}: {err.strerror or err}") from None
    if problems is not None:
        from lbsim.plots.layout import figure_problems

        for name, fig in figs.items():
            problems += figure_problems(fig, name)
    return save_figures(figs, target)
