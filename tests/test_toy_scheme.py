"""A new scheme on an existing loop is one module and one registration (issue 17).

``tests/plugins/toy_seesaw.py`` registers ``toy_seesaw`` (driver ``sync``); nothing else in the
project names it. It runs in the simulator (event path and fast path) and in the runtime (two gloo
CPU ranks, which load it through ``LBSIM_SCHEME_MODULES`` like any scheme kept outside the
package); both engines give every worker the batch the scheme decided, round by round.
"""

from __future__ import annotations

import csv
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lbsim.scenario.loader import load_scenario
from lbsim.schemes.registry import scheme_names, unregister_scheme

PLUGINS = Path(__file__).resolve().parent / "plugins"
GLOBAL_BATCH, UPDATES, SHIFT = 32, 5, 3


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The toy scheme registered for one test (and named for the runtime's ranks), then forgotten."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("LBSIM_SCHEME_MODULES", "toy_seesaw")
    sys.modules.pop("toy_seesaw", None)
    module = importlib.import_module("toy_seesaw")
    try:
        yield module
    finally:
        unregister_scheme("toy_seesaw")
        sys.modules.pop("toy_seesaw", None)


def _scenario(tmp_path: Path) -> Path:
    groups = "\n".join(f"    - {{instance: c5.xlarge, count: 1, t0_s: 0.01, samples_per_s: {v}, max_batch: 512}}"
                       for v in (2000.0, 1000.0))
    path = tmp_path / "toy.yaml"
    path.write_text(
        "name: toy\nseed: 3\n"
        f"workload: {{model: resnet50_imagenet, global_batch: {GLOBAL_BATCH}, updates: {UPDATES}}}\n"
        f"cluster:\n  groups:\n{groups}\n"
        "network: {name: ring_allreduce}\n"
        "numerics: {model: softmax, learning_rate: 0.1}\n"
        f"scheme: {{name: toy_seesaw, shift: {SHIFT}}}\n", encoding="utf-8")
    return path


def _batches(rows: list[dict[str, str]]) -> dict[int, tuple[int, ...]]:
    out: dict[int, dict[int, int]] = {}
    for r in rows:
        out.setdefault(int(r["update"]), {})[int(r["worker"])] = int(r["batch"])
    return {u: tuple(b[w] for w in sorted(b)) for u, b in sorted(out.items())}


def _expected(toy: object) -> dict[int, tuple[int, ...]]:
    return {u: toy.seesaw(GLOBAL_BATCH, 2, SHIFT, u) for u in range(UPDATES)}  # type: ignore[attr-defined]


def test_toy_scheme_is_registered_and_parsed(toy: object, tmp_path: Path) -> None:
    assert "toy_seesaw" in scheme_names()
    scenario = load_scenario(_scenario(tmp_path))
    assert scenario.scheme.kind == "toy_seesaw" and scenario.scheme.shift == SHIFT  # type: ignore[attr-defined]
    assert _expected(toy)[0] == (19, 13) and _expected(toy)[1] == (13, 19)


@pytest.mark.parametrize("fast", [True, False])
def test_toy_scheme_in_the_simulator(toy: object, tmp_path: Path, fast: bool) -> None:
    from lbsim.simulator.run import simulate

    result = simulate(load_scenario(_scenario(tmp_path)), fast=fast)
    rows = [{"update": str(r.update), "worker": str(r.worker), "batch": str(r.batch)} for r in result.iterations]
    assert _batches(rows) == _expected(toy)
    assert result.summary["scheme"] == "toy_seesaw" and result.summary["toy_rounds"] == UPDATES - 1


def test_toy_scheme_in_the_runtime(toy: object, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("psutil")
    from lbsim.runtime.config import RuntimeOptions, check_runnable
    from lbsim.runtime.launch import launch
    from lbsim.runtime.worker import Job, Task

    path = _scenario(tmp_path)
    ranks = check_runnable(load_scenario(path), RuntimeOptions())
    assert ranks == 2  # the sync driver's loop: no parameter-server rank
    out = tmp_path / "run"
    launch(Job(scenario=str(path), options=RuntimeOptions(timeout_s=60), tasks=(Task("train", str(out)),)), ranks)
    with open(out / "iterations.csv", encoding="utf-8", newline="") as fh:
        assert _batches(list(csv.DictReader(fh))) == _expected(toy)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["engine"] == "runtime" and summary["scheme"] == "toy_seesaw"
