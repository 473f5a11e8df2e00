"""Nodes, links, compute curves and overlap in the scenario and in both synchronous paths.

Exact timelines on tiny scenarios: every figure is chosen so the expected times are exact in
floating point (1 GB at 1 GB/s, batches that divide the throughput).
"""

from __future__ import annotations

import pytest

from lbsim.errors import InputError
from lbsim.network.topology import topology_of
from lbsim.scenario.loader import dump_scenario, scenario_from_data
from lbsim.scenario.overrides import parse_yaml
from lbsim.scenario.resolve import ComputeCurve, resolve_workers
from lbsim.simulator.run import simulate

GBPS_1GB = 8.0  # 8 Gbit/s = 1e9 bytes/s


def _data(groups, *, overlap=None, algorithm="ring", network=None, updates=3, gradient_bytes=1_000_000_000,
          global_batch=None):
    workload = {"model": "resnet50_imagenet", "global_batch": global_batch or 50 * sum(g["count"] for g in groups),
                "updates": updates, "gradient_bytes": gradient_bytes}
    if overlap is not None:
        workload["overlap"] = overlap
    return {
        "workload": workload,
        "cluster": {"groups": groups},
        "network": network or {"name": "ring_allreduce", "alpha_s": 0.0, "algorithm": algorithm},
        "scheme": {"name": "bsp"},
    }


def _group(count=1, speed=25.0, **kw):
    return {"instance": "g4dn.12xlarge", "count": count, "t0_s": 0.0, "samples_per_s": speed, "max_batch": 1000,
            "bandwidth_gbps": GBPS_1GB, **kw}


def _both(data):
    sc = scenario_from_data(data)
    fast, slow = simulate(sc), simulate(sc, fast=False)
    assert list(fast.iterations) == list(slow.iterations)
    assert fast.summary == slow.summary
    return fast


# -- nodes from the scenario ------------------------------------------------------------------

def test_workers_per_node_builds_nodes_within_each_group() -> None:
    sc = scenario_from_data(_data([_group(6, workers_per_node=4, intra_bandwidth_gbps=80.0),
                                   _group(1), _group(3, workers_per_node=2)]))
    ws = resolve_workers(sc)
    assert [w.node for w in ws] == [0, 0, 0, 0, 1, 1, 2, 3, 3, 4]
    assert [w.node_size for w in ws] == [4, 4, 4, 4, 2, 2, 1, 2, 2, 1]
    topo = topology_of(ws, nic_latency_s=1e-4)
    assert topo.node_sizes == (4, 2, 1, 2, 1)
    assert topo.intra[0].bandwidth_bytes_per_s == 80.0e9 / 8
    assert topo.intra[3].bandwidth_bytes_per_s == 56.8e9 / 8  # the catalog's g4dn.12xlarge PCIe
    assert {x.latency_s for x in topo.nic} == {1e-4}


def test_default_is_one_worker_per_node_and_the_resolved_text_is_unchanged() -> None:
    data = _data([_group(3)])
    sc = scenario_from_data(data)
    assert [w.node for w in resolve_workers(sc)] == [0, 1, 2]
    text = dump_scenario(sc)
    for key in ("workers_per_node", "overlap", "compute_curve", "algorithm", "intra_", "nic_latency_s"):
        assert key not in text  # scenarios written before nodes existed resolve to the same text
    assert scenario_from_data(parse_yaml(text)) == sc
    data["cluster"]["groups"][0]["workers_per_node"] = 2
    text2 = dump_scenario(scenario_from_data(data))
    assert "workers_per_node: 2" in text2
    assert scenario_from_data(parse_yaml(text2)) == scenario_from_data(data)


@pytest.mark.parametrize(("change", "path", "words"), [
    ({"workers_per_node": 5}, "cluster.groups[0].workers_per_node", "valid: 1..4"),
    ({"workers_per_node": 0}, "cluster.groups[0].workers_per_node", "must be > 0"),
    ({"instance": "g4dn.xlarge", "workers_per_node": 2}, "cluster.groups[0].workers_per_node", "valid: 1..1"),
    ({"instance": "c5.xlarge", "workers_per_node": 2}, "cluster.groups[0].intra_bandwidth_gbps", "give intra"),
    ({"compute_curve": [[8, 0.1]]}, "cluster.groups[0].compute_curve", "at least 2"),
    ({"compute_curve": [[8, 0.1], [4, 0.2]]}, "cluster.groups[0].compute_curve[1]", "increasing"),
    ({"compute_curve": [[8, 0.1], [16]]}, "cluster.groups[0].compute_curve[1]", "[batch, step_s]"),
    ({"compute_curve": [[8, 0.1], [16, -1]]}, "cluster.groups[0].compute_curve[1]", "> 0"),
    ({"shared_node_slowdown": -0.1}, "cluster.groups[0].shared_node_slowdown", ">= 0"),
])
def test_bad_node_and_curve_keys_name_the_key(change, path, words) -> None:
    with pytest.raises(InputError) as err:
        scenario_from_data(_data([_group(4, **change)]))
    assert err.value.path == path
    assert words in str(err.value)


def test_bad_algorithm_and_overlap() -> None:
    with pytest.raises(InputError, match="valid: ring, hierarchical, tree, nccl"):
        scenario_from_data(_data([_group(2)], algorithm="butterfly"))
    with pytest.raises(InputError) as err:
        scenario_from_data(_data([_group(2)], overlap={"hide_share": 1.5}))
    assert err.value.path == "workload.overlap.hide_share"


def test_compute_curve_interpolates_and_extrapolates_linearly() -> None:
    c = ComputeCurve((8.0, 16.0, 32.0), (0.1, 0.3, 0.4))
    assert c.step_s(8) == 0.1 and c.step_s(32) == 0.4
    assert c.step_s(12) == pytest.approx(0.2)
    assert c.step_s(24) == pytest.approx(0.35)
    assert c.step_s(4) == pytest.approx(0.0)  # the first segment, extended
    assert c.step_s(64) == pytest.approx(0.6)  # the last segment, extended
    assert c.step_s(1) == 0.0  # extended below 0: never a negative time
    falling = ComputeCurve((8.0, 16.0), (0.4, 0.2))  # a non-monotone curve extended far beyond its end
    assert falling.step_s(24) == pytest.approx(0.0) and falling.step_s(100) == 0.0


def test_shared_node_slowdown_scales_compute_of_shared_nodes_only() -> None:
    sc = scenario_from_data(_data([_group(5, workers_per_node=4, shared_node_slowdown=0.1, t0_s=0.5,
                                          compute_curve=[[10, 1.0], [20, 2.0]])]))
    ws = resolve_workers(sc)
    assert [w.compute_s(10) for w in ws] == pytest.approx([1.3] * 4 + [1.0])  # 1 + 0.1 (4 - 1); alone: 1
    assert [w.t0_s for w in ws] == pytest.approx([0.65] * 4 + [0.5])  # schemes see the slower node too


# -- exact timelines ----------------------------------------------------------------------------

def _iteration_s(result) -> list[float]:
    return [r.end_s - r.start_s for r in result.iterations]


def test_no_overlap_comm_follows_compute() -> None:
    # 2 workers alone on their nodes, 50 samples at 25/s = 2 s; ring 2 * 1/2 * 1 GB / 1 GB/s = 1 s
    res = _both(_data([_group(2)]))
    assert {r.compute_s for r in res.iterations} == {2.0}
    assert {r.comm_s for r in res.iterations} == {1.0}
    assert [u.time_s for u in res.updates] == [3.0, 6.0, 9.0]


def test_overlap_fully_hidden() -> None:
    # hide_share 1, tail 0: the 1 s all-reduce hides under the 2 s compute
    res = _both(_data([_group(2)], overlap={"hide_share": 1.0, "tail_share": 0.0}))
    assert {r.comm_s for r in res.iterations} == {0.0}
    assert [u.time_s for u in res.updates] == [2.0, 4.0, 6.0]


def test_overlap_none_hidden_when_tail_is_everything() -> None:
    res = _both(_data([_group(2)], overlap={"hide_share": 1.0, "tail_share": 1.0}))
    assert [u.time_s for u in res.updates] == [3.0, 6.0, 9.0]


def test_overlap_partly_hidden_under_the_last_workers_backward() -> None:
    # worker 1 is twice as slow (4 s); exposed = max(0.25 * 1, 1 - 0.125 * 4) = 0.5 s
    res = _both(_data([_group(1), _group(1, speed=12.5)], overlap={"hide_share": 0.125, "tail_share": 0.25}))
    assert [u.time_s for u in res.updates] == [4.5, 9.0, 13.5]
    assert {r.comm_s for r in res.iterations} == {0.5}


def test_parameter_server_does_not_overlap() -> None:
    ps = {"name": "parameter_server", "shards": 1, "server_bandwidth_gbps": 8.0, "apply_s": 0.0, "latency_s": 0.0}
    plain = simulate(scenario_from_data(_data([_group(2)], network=ps)))
    over = simulate(scenario_from_data(_data([_group(2)], network=ps, overlap={"hide_share": 1.0, "tail_share": 0.0})))
    assert list(plain.iterations) == list(over.iterations)


def test_two_nodes_of_two_ring_and_hierarchical_timelines() -> None:
    # 4 workers on 2 nodes; NIC 1 GB/s, PCIe 10 GB/s; compute 2 s
    groups = [_group(4, workers_per_node=2, intra_bandwidth_gbps=80.0, intra_latency_s=0.0)]
    ring = _both(_data(groups))
    assert [u.time_s for u in ring.updates] == pytest.approx([3.5, 7.0, 10.5])  # ring 2 * 3/4 s over the NIC
    hier = _both(_data(groups, algorithm="hierarchical"))
    assert [u.time_s for u in hier.updates] == pytest.approx([3.1, 6.2, 9.3])  # 0.1 intra + 1 inter


def test_network_contention_on_one_worker_slows_its_nodes_nic() -> None:
    groups = [_group(4, workers_per_node=2, intra_bandwidth_gbps=80.0, intra_latency_s=0.0)]
    data = _data(groups, algorithm="hierarchical", updates=1)
    data["contention"] = [{"name": "scheduled", "workers": [3], "slowdown": 4.0, "target": "network"}]
    res = _both(data)
    # node 1's NIC at 1/4: inter part 4 s; its PCIe at 1/4: intra RS + AG 2 * 0.2 s
    assert [u.time_s for u in res.updates] == pytest.approx([2.0 + 0.4 + 4.0])


def test_compute_curve_in_the_engines() -> None:
    res = _both(_data([_group(2, compute_curve=[[10, 1.0], [20, 1.5]])], updates=1))
    assert {r.compute_s for r in res.iterations} == {3.0}  # b = 50: the last segment extended


# -- the parameter server on nodes ----------------------------------------------------------------

PS_FAST = {"name": "parameter_server", "shards": 1, "server_bandwidth_gbps": 80.0, "apply_s": 0.0, "latency_s": 0.0}


@pytest.mark.parametrize("scheme", ["bsp", "asp"])
def test_workers_on_one_node_share_its_nic_to_the_server(scheme) -> None:
    # S = 1 GB, every NIC 1 GB/s, the server's 10 GB/s: alone, the two pushes overlap (both end at 3 s);
    # on one node they queue for its NIC (3 s, then 4 s)
    def run(groups):
        data = _data(groups, network=PS_FAST, updates=2)
        data["scheme"] = {"name": scheme}
        return simulate(scenario_from_data(data))

    alone = run([_group(2)])
    shared = run([_group(2, workers_per_node=2)])
    assert [u.time_s for u in alone.updates] == pytest.approx([3.0, 3.0] if scheme == "asp" else [3.0, 7.0])
    assert [u.time_s for u in shared.updates] == pytest.approx([3.0, 4.0] if scheme == "asp" else [4.0, 9.0])


def test_network_contention_on_a_shared_node_slows_both_workers_transfers() -> None:
    data = _data([_group(2, workers_per_node=2)], network=PS_FAST, updates=1)
    data["contention"] = [{"name": "scheduled", "workers": [1], "slowdown": 2.0, "target": "network"}]
    res = simulate(scenario_from_data(data))
    assert [u.time_s for u in res.updates] == pytest.approx([2.0 + 2.0 + 2.0])  # both pushes at half speed


@pytest.mark.parametrize("algorithm", ["tree", "nccl"])
def test_three_nodes_tree_timeline(algorithm) -> None:
    # 6 workers on 3 nodes of 2: one pipeline through the chains (10 GB/s) and the NIC tree (1 GB/s):
    # S / B_bottleneck = 1 GB / 1 GB/s = 1 s per round, the chains hidden under it
    groups = [_group(6, workers_per_node=2, intra_bandwidth_gbps=80.0, intra_latency_s=0.0)]
    res = _both(_data(groups, algorithm=algorithm))
    assert [u.time_s for u in res.updates] == pytest.approx([3.0, 6.0, 9.0])


def test_three_nodes_tree_timeline_with_pipeline_fill() -> None:
    # as above with chunk_share 0.05: d = 2, 3 chain hops on the path -> 2 (3 + 2) = 10 stages,
    # fill 9 * 0.05 * 1 s = 0.45 s per round
    groups = [_group(6, workers_per_node=2, intra_bandwidth_gbps=80.0, intra_latency_s=0.0)]
    data = _data(groups, algorithm="tree")
    data["network"]["chunk_share"] = 0.05
    res = _both(data)
    assert [u.time_s for u in res.updates] == pytest.approx([3.45, 6.9, 10.35])
