"""``lbsim plot`` and ``run --plots``: the figures exist as PNG and SVG, open as images, and are readable
(every axes with data has labelled axes, every figure a title and a legend, units where there are units,
no text clipped and no non-negative quantity drawn below zero: :func:`lbsim.plots.layout.figure_problems`).

Readability is checked on the matplotlib figure objects before they are saved; the files are then
opened (PNG decoded, SVG parsed).
"""

from __future__ import annotations

import csv
import io
import shutil
import xml.etree.ElementTree as ET
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("matplotlib")

from lbsim.cli import main  # noqa: E402
from lbsim.plots import figures_for, save_figures  # noqa: E402
from lbsim.plots.layout import figure_problems  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
EC2 = REPO / "scenarios" / "ec2_mixed.yaml"

SWEEP = {
    "base": str(EC2),
    "set": {"workload.time_budget_s": 20, "contention.1.start_s": 5},
    "factors": {
        "scheme": ["bsp", "asp", "lbbsp"],
        "stragglers": {"1": {"contention.1.workers": [2]}, "2": {"contention.1.workers": [2, 4]}},
        "slowdown": {"1.5": {"contention.1.slowdown": 1.5}, "3": {"contention.1.slowdown": 3.0}},
    },
    "repetitions": 2,
}
SWEEP_FIGURES = {"throughput", "speedup_vs_bsp", "iteration_cdf", "staleness", "lbbsp_batches", "timelines"}


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from lbsim.simulator.run import simulate
    from lbsim.sweep import load_sweep
    from lbsim.sweep.backends import LocalPool
    from lbsim.sweep.runner import run_sweep

    folder = tmp_path_factory.mktemp("plots")
    path = folder / "plots.yaml"
    path.write_text(yaml.safe_dump(SWEEP, sort_keys=False), encoding="utf-8")
    report = run_sweep(load_sweep(path), folder / "out", engine=simulate, backend=LocalPool(2))
    assert report.ran == 24 and not report.failed
    return folder / "out"


def _labels(ax: Any, axis: str) -> str:
    """The axes' own label, or that of an axes it shares this axis with (a shared axis is labelled once)."""
    getter = f"get_{axis}label"
    own = getattr(ax, getter)()
    if own:
        return own
    shared = ax.get_shared_x_axes() if axis == "x" else ax.get_shared_y_axes()
    return next((getattr(s, getter)() for s in shared.get_siblings(ax) if getattr(s, getter)()), "")


def assert_readable(name: str, fig: Any) -> None:
    axes = [ax for ax in fig.axes if ax.has_data()]
    assert axes, f"{name}: no data"
    assert fig.get_suptitle() or all(ax.get_title() for ax in axes), f"{name}: no title"
    for ax in axes:
        assert _labels(ax, "x"), f"{name}: an x axis without a label"
        assert _labels(ax, "y"), f"{name}: a y axis without a label"
    # a legend, unless each bar is named by its own tick label (a legend would repeat the axis)
    named = all(len(ax.patches) == len([t for t in ax.get_xticklabels() if t.get_text()]) > 0 for ax in axes)
    assert any(ax.get_legend() is not None for ax in axes) or fig.legends or named, f"{name}: no legend"
    assert figure_problems(fig, name) == []  # nothing clipped, no non-negative quantity below zero


def assert_files(out: Path, names: set[str]) -> None:
    from matplotlib.image import imread

    for name in names:
        png, svg = out / f"{name}.png", out / f"{name}.svg"
        assert png.stat().st_size > 5000 and svg.stat().st_size > 5000, name
        image = imread(png)
        assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 500, (name, image.shape)
        assert image.std() > 0.05, f"{name}.png is blank"
        assert ET.parse(svg).getroot().tag.endswith("svg")
    assert not list(out.glob(".*.tmp"))


def test_sweep_figures_are_readable(sweep_dir: Path, tmp_path: Path) -> None:
    figs = figures_for(sweep_dir)
    assert set(figs) == SWEEP_FIGURES
    for name, fig in figs.items():
        assert_readable(name, fig)
    units = {name: {_labels(ax, "x") for ax in fig.axes} | {_labels(ax, "y") for ax in fig.axes} for name, fig in figs.items()}
    assert "throughput (samples/s)" in units["throughput"]
    assert "speedup over BSP (throughput ratio)" in units["speedup_vs_bsp"] and "slowdown (x slower)" in units["speedup_vs_bsp"]
    assert "iteration time (s)" in units["iteration_cdf"]
    assert "batch size (samples)" in units["lbbsp_batches"] and "simulated time (s)" in units["lbbsp_batches"]
    assert "simulated time (s)" in units["timelines"]
    assert "staleness (updates between pull and apply)" in units["staleness"]
    legend = {t.get_text() for ax in figs["throughput"].axes if ax.get_legend() for t in ax.get_legend().get_texts()}
    assert legend == {"bsp", "asp", "lbbsp"}
    # throughput: a group per condition (4), a bar per scheme, error bars over seeds
    (panel,) = [ax for ax in figs["throughput"].axes if ax.has_data()]
    assert [t.get_text() for t in panel.get_xticklabels()] == [
        "stragglers=1\nslowdown=1.5", "stragglers=1\nslowdown=3", "stragglers=2\nslowdown=1.5", "stragglers=2\nslowdown=3"]
    assert len(panel.patches) == 3 * 4
    # two seeds: each seed a dot and no interval (a t-interval from 2 values reaches below zero)
    assert "2 seeds: each seed a dot" in figs["throughput"].get_suptitle().replace("\n", " ")
    assert not [c for c in panel.containers if getattr(c, "errorbar", None) is not None and c.errorbar.lines[2]]
    assert "pooled" not in figs["speedup_vs_bsp"].get_suptitle()


def test_speedup_never_pools_a_factor_into_the_interval() -> None:
    """Three factors: x = slowdown, panels = stragglers, and burstiness gets a line per level; each
    interval is over the seeds alone (here 2 seeds with ratios 1.2 and 1.4 / 2.0 and 2.2)."""
    from lbsim.plots.data import SweepData
    from lbsim.plots.sweep_figs import _Table, speedup_figure

    rows = []
    for scheme, base in (("bsp", 100.0), ("asp", None)):
        for strag in ("1", "2"):
            for slow in ("1.5", "3"):
                for burst, gain in (("short", 1.2), ("long", 2.0)):
                    for rep in (0, 1):
                        thr = 100.0 if base else 100.0 * (gain + 0.2 * rep)
                        rows.append({"run": f"{scheme}{strag}{slow}{burst}{rep}", "scheme": scheme, "stragglers": strag,
                                     "slowdown": slow, "burstiness": burst, "repetition": str(rep),
                                     "throughput_samples_per_s": str(thr)})
    sweep = SweepData(Path("."), "t", ["scheme", "stragglers", "slowdown", "burstiness"], rows)
    fig = speedup_figure(_Table(sweep), None)
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert {t.get_text() for lg in legends for t in lg.get_texts()} == {"asp, burstiness=short", "asp, burstiness=long"}
    panel = fig.axes[0]
    assert panel.get_title() == "stragglers = 1"
    means = sorted({round(float(y), 6) for line in panel.get_lines() if line.get_marker() in ("o", "s")
                    for y in line.get_ydata()})
    # per burstiness level: the geometric mean over seeds, not over both levels
    assert means == [round((1.2 * 1.4) ** 0.5, 6), round((2.0 * 2.2) ** 0.5, 6)]


def test_plot_command_on_a_sweep(sweep_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "figs"
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["plot", str(sweep_dir), "--out", str(out), "--timeline-s", "10"]) == 0
    assert buf.getvalue().startswith(f"{len(SWEEP_FIGURES)} figures (PNG and SVG)")
    assert {p.name for p in out.iterdir()} == {f"{n}.{e}" for n in SWEEP_FIGURES for e in ("png", "svg")}
    assert_files(out, SWEEP_FIGURES)


def _a_run(sweep_dir: Path, scheme: str, tmp_path: Path) -> Path:
    with (sweep_dir / "results.csv").open(newline="", encoding="utf-8") as fh:
        run = next(r["run"] for r in csv.DictReader(fh) if r["scheme"] == scheme)
    return Path(shutil.copytree(sweep_dir / "runs" / run, tmp_path / scheme))


def test_run_figures_and_numerics(sweep_dir: Path, tmp_path: Path) -> None:
    asp = _a_run(sweep_dir, "asp", tmp_path)
    figs = figures_for(asp)
    assert set(figs) == {"iteration_cdf", "phases", "timeline", "staleness"}
    lbbsp = _a_run(sweep_dir, "lbbsp", tmp_path)
    (lbbsp / "numerics.csv").write_text("update,time_s,loss,accuracy\n0,0,2.3,0.1\n20,5.5,0.9,0.7\n40,11,0.4,0.9\n",
                                        encoding="utf-8")
    figs = figures_for(lbbsp)
    assert set(figs) == {"iteration_cdf", "phases", "timeline", "batch_sizes", "accuracy"}
    for name, fig in figs.items():
        assert_readable(name, fig)
    labels = {ax.get_ylabel() for ax in figs["accuracy"].axes}
    assert labels == {"held-out accuracy (fraction)", "held-out loss (nats)"}
    paths = save_figures({"accuracy": figs["accuracy"]}, lbbsp / "plots")
    assert [p.name for p in paths] == ["accuracy.png", "accuracy.svg"]
    assert_files(lbbsp / "plots", {"accuracy"})


def test_sweep_with_numerics_adds_accuracy_and_time_to_target(sweep_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(sweep_dir, tmp_path / "sweep"))
    for run in (copy / "runs").iterdir():
        (run / "numerics.csv").write_text("update,time_s,loss,accuracy\n0,0,2.3,0.1\n20,9,0.5,0.92\n", encoding="utf-8")
    with (copy / "results.csv").open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows, header = list(reader), list(reader.fieldnames or [])
    with (copy / "results.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, [*header, "time_to_target_s"])
        writer.writeheader()
        for k, r in enumerate(rows):
            writer.writerow({**r, "time_to_target_s": "" if k % 5 == 0 else str(9 + k)})
    figs = figures_for(copy)
    assert set(figs) == SWEEP_FIGURES | {"accuracy", "time_to_target"}
    for name in ("accuracy", "time_to_target"):
        assert_readable(name, figs[name])


def test_run_plots_flag(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with redirect_stdout(io.StringIO()):
        assert main(["run", str(EC2), "--scheme", "lbbsp", "--set", "workload.time_budget_s=20", "--plots", "--out", str(out), "-q"]) == 0
    names = {"iteration_cdf", "phases", "timeline", "batch_sizes"}
    assert {p.name for p in (out / "plots").iterdir()} == {f"{n}.{e}" for n in names for e in ("png", "svg")}
    assert_files(out / "plots", names)


def test_plot_bad_input(sweep_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["plot", str(tmp_path)]) == 2
    assert "not a sweep folder" in capsys.readouterr().err
    assert main(["plot", str(sweep_dir), "--x", "nope", "--out", str(tmp_path / "f")]) == 2
    assert "valid: stragglers, slowdown" in capsys.readouterr().err
    assert not (tmp_path / "f").exists()


def test_compare_folder_figures(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    with redirect_stdout(io.StringIO()):
        assert main(["compare", str(EC2), "--schemes", "bsp,asp,lbbsp", "--set", "workload.time_budget_s=15",
                     "--out", str(out), "-q", "--format", "parquet"]) == 0
        assert main(["plot", str(out), "-q"]) == 0
    names = {"throughput", "phases", "iteration_cdf", "timelines", "staleness"}
    assert {p.stem for p in (out / "plots").iterdir()} == names
    figs = figures_for(out)
    for name, fig in figs.items():
        assert_readable(name, fig)
    (bars,) = [ax for ax in figs["throughput"].axes if ax.has_data()]
    assert [t.get_text() for t in bars.get_xticklabels()] == ["bsp", "asp", "lbbsp"]
    assert [t.get_text() for t in bars.texts][0] == "1.00x"


def test_big_run_figures_stay_bounded(tmp_path: Path) -> None:
    """200 workers: the timeline shows at most MAX_TIMELINE_WORKERS rows (the first of each type);
    coinciding batch trajectories are drawn once each, labelled with how many workers they stand for."""
    from lbsim.plots.run_figs import batch_groups, timeline_workers
    from lbsim.plots.style import MAX_TIMELINE_WORKERS

    out = tmp_path / "big"
    sets = ["cluster.groups.0.count=50", "cluster.groups.1.count=50", "cluster.groups.2.count=50",
            "cluster.groups.3.count=50", "workload.global_batch=12800", "workload.updates=20"]
    with redirect_stdout(io.StringIO()):
        assert main(["run", str(REPO / "scenarios" / "bench" / "large.yaml"), "--scheme", "lbbsp", "--out", str(out), "-q",
                     *[a for kv in sets for a in ("--set", kv)]]) == 0
    from lbsim.plots.data import read_run

    run = read_run(out)
    shown = timeline_workers(run)
    assert len(shown) <= MAX_TIMELINE_WORKERS and shown[:6] == [0, 1, 2, 3, 4, 5] and 50 in shown and 150 in shown
    assert sum(len(ws) for ws, _, _ in batch_groups(run)) == 200 and len(batch_groups(run, limit=16)) == 17
    figs = figures_for(out)
    (bs,) = figs["batch_sizes"].axes  # 200 distinct trajectories (jitter): a median and band per instance type
    assert [t.get_text() for t in bs.get_legend().get_texts()] == [
        "p4d.24xlarge (50 workers)", "p3.2xlarge (50 workers)", "g5.xlarge (50 workers)", "g4dn.xlarge (50 workers)"]
    (tl,) = figs["timeline"].axes
    assert len(tl.get_yticklabels()) == len(shown) and "of 200" in tl.get_ylabel()
    w, h = figs["timeline"].get_size_inches()
    assert h < 12
    for name, fig in figs.items():
        assert_readable(name, fig)
    # BSP's even split: every worker the same trajectory, drawn once for all 200
    with redirect_stdout(io.StringIO()):
        assert main(["run", str(REPO / "scenarios" / "bench" / "large.yaml"), "--scheme", "bsp", "--out", str(tmp_path / "b"),
                     "-q", *[a for kv in sets for a in ("--set", kv)]]) == 0
    (group,) = batch_groups(read_run(tmp_path / "b"))
    assert group[0] == list(range(200))


def test_t_quantiles() -> None:
    from lbsim.plots.stats import t975

    assert t975(1) == 12.706 and t975(2) == 4.303 and abs(t975(60) - 2.000) < 0.001 and abs(t975(120) - 1.980) < 0.001


def test_intervals_need_three_values_and_stay_in_range() -> None:
    from lbsim.plots.stats import mean_bootstrap95, ratio_log_t95, t975

    for est in (mean_bootstrap95([5.0, 7.0]), ratio_log_t95([2.0, 8.0])):
        assert not est.has_interval and est.errors() == (0.0, 0.0)
    assert mean_bootstrap95([5.0, 7.0]).center == 6.0 and ratio_log_t95([2.0, 8.0]).center == pytest.approx(4.0)
    # the example of the issue: throughputs 345 and 533 had a t-interval down to -750; three seeds now
    est = mean_bootstrap95([345.0, 533.0, 400.0])
    assert 345.0 <= est.lo < est.center < est.hi <= 533.0
    assert mean_bootstrap95([345.0, 533.0, 400.0]) == est  # a fixed seed: the same figure every time
    # ratios: the geometric mean and the t-interval of the logs, back on the ratio scale
    r = ratio_log_t95([1.0, 2.0, 4.0])
    half = t975(2) * np.log(2.0) / np.sqrt(3)  # logs 0, ln2, 2 ln2: sd = ln 2
    assert r.center == pytest.approx(2.0) and r.lo == pytest.approx(2.0 * np.exp(-half)) and r.hi == pytest.approx(2.0 * np.exp(half))
    with pytest.raises(ValueError):
        ratio_log_t95([1.0, 0.0, 2.0])


@given(st.lists(st.floats(1e-6, 1e6), min_size=3, max_size=12))
@settings(max_examples=60, deadline=None)
def test_intervals_never_leave_the_range(values: list[float]) -> None:
    from lbsim.plots.stats import mean_bootstrap95, ratio_log_t95

    b = mean_bootstrap95(values)
    assert min(values) * (1 - 1e-12) <= b.lo <= b.center <= b.hi <= max(values) * (1 + 1e-12)
    r = ratio_log_t95(values)
    assert 0 < r.lo <= r.center <= r.hi


def test_the_figure_check_catches_clipping_and_values_below_zero() -> None:
    """The reviewer's check used on every figure can fail: a title wider than the figure, and an error
    bar of a throughput reaching below zero, are both reported; wrapping the title fixes the first."""
    from lbsim.plots.layout import fit_titles
    from lbsim.plots.style import new_figure

    fig, ax = new_figure(4, 3)
    ax[0, 0].bar([0, 1], [400.0, 1400.0], yerr=[[1150.0, 100.0], [1100.0, 100.0]])
    ax[0, 0].set_ylabel("throughput (samples/s)")
    ax[0, 0].set_xlabel("scheme")
    fig.suptitle("A title far too long for a figure four inches wide, as the compare figure used to have")
    problems = figure_problems(fig)
    assert any("is clipped" in p for p in problems)
    assert any("below zero" in p and "throughput" in p for p in problems)
    fit_titles(fig)
    assert not any("is clipped" in p for p in figure_problems(fig))


@pytest.mark.parametrize(("target", "content", "message"), [
    ("results.csv", None, "results.csv:"),  # a short row appended
    ("results.csv", "", "an empty table"),
    ("sweep.json", "{bad", "sweep.json: cannot read it"),
    ("run/summary.json", "[1, 2]", "expected a JSON object"),
    ("run/iterations.csv", "x,y\n1,2\n", "missing columns worker"),
])
def test_plot_of_a_corrupt_folder_names_the_file(sweep_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 target: str, content: str | None, message: str) -> None:
    """A hand-edited or truncated output folder is bad input (exit 2 naming the file), not an internal error (exit 1)."""
    copy = Path(shutil.copytree(sweep_dir, tmp_path / "sweep"))
    run = sorted((copy / "runs").iterdir())[0]
    path = run / target.split("/")[1] if target.startswith("run/") else copy / target
    if content is None:
        with path.open("a", encoding="utf-8") as fh:
            fh.write("garbage,,\n")
    else:
        path.write_text(content, encoding="utf-8")
    assert main(["plot", str(copy), "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lbsim: error: ") and message in err and "re-run the command" in err
    assert not (tmp_path / "f").exists()


def test_load_of_a_corrupt_folder_is_an_input_error(sweep_dir: Path, tmp_path: Path) -> None:
    import lbsim
    from lbsim.errors import InputError

    copy = Path(shutil.copytree(sweep_dir, tmp_path / "sweep"))
    (copy / "sweep.json").write_text("{bad", encoding="utf-8")
    with pytest.raises(InputError, match="sweep.json: cannot read it"):
        lbsim.load(copy)
