"""The ``data:`` section: bad input is a one-line key-path InputError; good input resolves per worker."""

from __future__ import annotations

from typing import Any

import pytest

from lbsim.errors import InputError

ENTRY = {"workers": "all", "local_fraction": 0.1, "remote_gbps": 1.0}


def _data(sim, data: Any, count: int = 4):  # type: ignore[no-untyped-def]
    from lbsim.scenario.loader import scenario_from_data

    d = sim.data([sim.group(count)], network=sim.ring(), scheme="bsp", global_batch=64)
    d["data"] = data
    return scenario_from_data(d)


def _with(**entry: Any) -> dict[str, Any]:
    return {"sample_bytes": 1000, "placement": [{**ENTRY, **entry}]}


BAD = [
    ({"placement": [ENTRY]}, "data.sample_bytes", "required key is missing"),
    ({"sample_bytes": 0, "placement": [ENTRY]}, "data.sample_bytes", "must be > 0"),
    ({"sample_bytes": 1000, "placement": []}, "data.placement", "must not be empty"),
    ({"sample_bytes": 1000}, "data.placement", "required key is missing"),
    ({"sample_bytes": 1000, "placement": [{"workers": "all"}]}, "data.placement[0].remote_gbps", "required key is missing"),
    (_with(remote_gbps=-1), "data.placement[0].remote_gbps", "must be > 0"),
    (_with(local_gbps=0), "data.placement[0].local_gbps", "must be > 0"),
    (_with(remote_latency_s=-0.1), "data.placement[0].remote_latency_s", "must be >= 0"),
    (_with(local_fraction=1.5), "data.placement[0].local_fraction", "must be <= 1"),
    (_with(local_fracton=0.1), "data.placement[0].local_fracton", "did you mean 'local_fraction'"),
    (_with(workers=[7]), "data.placement[0].workers[0]", "worker 7 does not exist"),
    (_with(workers=["p3.2xlarge"]), "data.placement[0].workers[0]", "no worker of instance type"),
    (_with(workers=[0, 1]), "data.placement", "worker(s) 2, 3 are in no entry"),
    (_with(local_fraction=0.3), "data.placement", "sum to 1.2"),
    ({"sample_bytes": 1000, "placement": [ENTRY, {**ENTRY, "workers": [2]}]}, "data.placement[1].workers", "already placed by data.placement[0]"),
    ({**_with(), "storage": {"bandwidth_gbps": 0}}, "data.storage.bandwidth_gbps", "must be > 0"),
    ({**_with(), "storage": {"latency_s": 0.1}}, "data.storage.bandwidth_gbps", "required key is missing"),
    ({**_with(), "storage": 5}, "data.storage", "expected a mapping"),
    ("fast", "data", "expected a mapping"),
]


@pytest.mark.parametrize("data,path,message", BAD, ids=[f"{b[1]}:{b[2][:20]}" for b in BAD])
def test_bad_data_section(sim, data: Any, path: str, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as err:
        _data(sim, data)
    assert err.value.path == path, str(err.value)
    assert message in err.value.message, str(err.value)


def test_bad_data_through_the_cli(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from lbsim.cli import main

    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "workload: {model: resnet50_imagenet, global_batch: 96, updates: 2}\n"
        "cluster: {groups: [{instance: g4dn.xlarge, count: 2}]}\n"
        "data: {sample_bytes: 110000, placement: [{workers: all, local_fraction: 0.6, remote_gbps: 1}]}\n",
        encoding="utf-8",
    )
    rc = main(["run", str(scenario), "--out", str(tmp_path / "out"), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "data.placement: the workers' local_fraction values sum to 1.2" in err[0]
    assert not (tmp_path / "out").exists()


def test_good_data_section_resolves_per_worker(sim) -> None:  # type: ignore[no-untyped-def]
    from lbsim.scenario.data import resolve_data
    from lbsim.scenario.resolve import resolve_workers

    s = _data(sim, {"sample_bytes": 1000, "storage": {"bandwidth_gbps": 10, "latency_s": 0.002},
                    "placement": [{"workers": [0, 2], "local_fraction": 0.25, "remote_gbps": 1, "remote_latency_s": 0.01},
                                  {"workers": [1, 3], "remote_gbps": 8}]})
    layout = resolve_data(s.data, resolve_workers(s))
    assert layout is not None
    assert [w.local_fraction for w in layout.workers] == [0.25, 0.0, 0.25, 0.0]
    assert layout.storage_share == pytest.approx(0.5)
    assert layout.quotas(64) == (16, 0, 16, 0, 32)
    # 3 local (1000 B at 16 Gbit/s) + 5 remote (1000 B at 1 Gbit/s; the storage NIC is faster) + latencies
    assert layout.fetch_s(0, 3, 5) == pytest.approx(3 * 0.5e-6 + 5 * 8e-6 + 0.012)
    assert layout.default_local(0, 10) == 3 and layout.default_local(1, 10) == 0  # round(2.5) halves up
    assert _data(sim, None).data is None
