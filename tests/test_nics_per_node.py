"""One NIC per GPU (``nics_per_node``): the engines' node bandwidth, and ``lbsim calibrate`` telling it from one per node.

A node of ``k`` workers sends through ``min(k, nics_per_node)`` NICs, so on InfiniBand nodes with a
NIC beside each GPU ``88`` has twice ``44``'s inter-node bandwidth. Synthetic rows generated with one
NIC per GPU are fitted on the hidden split ``2,4,8,11,44`` and recovered, ``88`` included; rows with
one NIC per node keep 1 (Pollux's files do too: tests/test_calibration.py's regression).
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from test_calibration_interval import TRUE8, S, _write, t_of

from lbsim.calibration.fit import calibrate_rows, nic_candidates
from lbsim.calibration.measured import Row
from lbsim.calibration.model import step_s
from lbsim.cli import main
from lbsim.scenario.loader import scenario_from_data
from lbsim.scenario.resolve import resolve_workers

FIT8 = [(2,), (4,), (8,), (1, 1), (4, 4)]
PER_GPU = replace(TRUE8, nic_bandwidth_gbps=10.0, nics_per_node=8)
PLACEMENTS = [(1,), (2,), (4,), (8,), (1, 1), (4, 4), (8, 8), (2, 8)]


def _rows(fig: object) -> list[Row]:
    return [Row(p, b, *step_s(p, t_of(b), S, fig)) for p in PLACEMENTS for b in (8, 32, 128, 512)]  # type: ignore[arg-type]


def test_a_node_sends_through_the_nics_beside_its_workers() -> None:
    group = {"instance": "p3.16xlarge", "samples_per_s": 100.0, "max_batch": 64, "bandwidth_gbps": 10.0}
    data = {"cluster": {"groups": [{**group, "count": 8, "workers_per_node": 8, "nics_per_node": 4},
                                   {**group, "count": 2, "workers_per_node": 2, "nics_per_node": 4},
                                   {**group, "count": 3, "workers_per_node": 3}]},
            "workload": {"updates": 2, "global_batch": 256}}
    bws = {w.node: w.bandwidth_gbps for w in resolve_workers(scenario_from_data(data))}
    assert bws == {0: 40.0, 1: 20.0, 2: 10.0}  # min(8, 4), min(2, 4) NICs, then the default one per node


def test_candidates_need_a_shared_node_across_nodes() -> None:
    assert nic_candidates([], FIT8) == (1, 8)
    assert nic_candidates([], [(2,), (4,), (8,), (1, 1)]) == (1,)  # 11 alone cannot tell them apart


@pytest.mark.parametrize(("fig", "nics"), [(PER_GPU, 8), (TRUE8, 1)])
def test_the_fit_rows_pick_the_nics(fig: object, nics: int) -> None:
    cal = calibrate_rows(_rows(fig), FIT8, S)
    assert cal.figures.nics_per_node == nics
    assert cal.figures.nic_bandwidth_gbps == pytest.approx(fig.nic_bandwidth_gbps, rel=1e-4)  # type: ignore[attr-defined]
    assert dict(cal.nic_residuals)[nics] < 1e-6


def test_cli_recovers_one_nic_per_gpu_and_the_engine_predicts_88(tmp_path: Path) -> None:
    src = _write(tmp_path / "m.csv", _rows(PER_GPU))
    out = tmp_path / "out"
    assert main(["calibrate", str(src), "--fit-placements", "2,4,8,11,44", "--gradient-bytes", str(S), "--out",
                 str(out), "-q"]) == 0
    g = yaml.safe_load((out / "fit.yaml").read_text())["cluster"]["groups"][0]
    assert g["nics_per_node"] == 8 and g["bandwidth_gbps"] == pytest.approx(10.0, rel=1e-4)
    with (out / "predictions.csv").open() as fh:
        got = list(csv.DictReader(fh))
    assert {r["placement"] for r in got} >= {"88", "28"}
    assert max(abs(float(r["relative_error"])) for r in got) < 1e-4  # the engine scales each node's NICs alike
