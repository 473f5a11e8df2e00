"""Closed-form checks of the all-reduce over nodes and links (lbsim/network/collectives.py, topology.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.network.algorithms import allreduce_s
from lbsim.network.collectives import (
    Link,
    bytes_per_s,
    hierarchical_allreduce_s,
    ring_allreduce_s,
    tree_allreduce_s,
)
from lbsim.network.topology import AllReducePlan, Topology

GB = 1e9  # bytes
FAST = Link(1e10, 0.0)  # 10 GB/s, no latency
NIC = Link(1e9, 0.0)  # 1 GB/s


def test_one_worker_per_node_is_the_classic_ring_bit_for_bit() -> None:
    bws = [bytes_per_s(8.0), bytes_per_s(5.0), bytes_per_s(2.5), bytes_per_s(10.0)]
    alpha, s, n = 5e-5, 97_999_999, 4
    inter = [Link(b, alpha) for b in bws]
    intra = [Link(1.0, 99.0)] * n  # never used: nobody shares a node
    old = 2 * (n - 1) * alpha + 2 * (n - 1) / n * s / min(bws)  # the formula before nodes existed
    for algorithm in ("ring", "hierarchical"):
        assert allreduce_s(s, [1] * n, intra, inter, algorithm=algorithm) == old


def test_single_node_uses_only_the_intra_link() -> None:
    intra = [Link(1e10, 1e-5)]
    inter = [Link(1.0, 10.0)]  # a NIC nobody crosses
    expect = 2 * 3 * 1e-5 + 2 * 3 / 4 * GB / 1e10  # 2(g-1) alpha + 2(g-1)/g S/B
    assert ring_allreduce_s(GB, [4], intra, inter) == pytest.approx(expect, rel=1e-15)
    assert hierarchical_allreduce_s(GB, [4], intra, inter) == pytest.approx(expect, rel=1e-15)


def test_two_nodes_of_two_ring_versus_hierarchical() -> None:
    # flat ring: 4 ranks, slowest hop the NIC: 2 * 3/4 * 1 GB / 1 GB/s = 1.5 s
    assert ring_allreduce_s(GB, [2, 2], [FAST, FAST], [NIC, NIC]) == pytest.approx(1.5)
    # hierarchical: intra RS + AG 2 * (1/2 * 1 GB / 10 GB/s) = 0.1 s; inter AR of 2 nodes 2 * 1/2 * 1 GB / 1 GB/s = 1 s
    assert hierarchical_allreduce_s(GB, [2, 2], [FAST, FAST], [NIC, NIC]) == pytest.approx(1.1)


def test_a_ring_step_lasts_as_long_as_its_slowest_hop() -> None:
    # 2 nodes x 2: the PCIe hop is slow to start (1 ms) but fast (0.025 s per step); the NIC hop 0.25 s:
    # a step is max over hops of (latency + S/n / B) = 0.25 s, not the NIC's time plus PCIe's latency
    intra, inter = [Link(1e10, 1e-3)] * 2, [Link(1e9, 0.0)] * 2
    assert ring_allreduce_s(GB, [2, 2], intra, inter) == pytest.approx(6 * 0.25)
    # ... and when the PCIe hop is the slowest (a huge latency), it sets the step
    intra = [Link(1e10, 0.5)] * 2
    assert ring_allreduce_s(GB, [2, 2], intra, inter) == pytest.approx(6 * (0.5 + 0.025))


def test_tree_is_one_pipeline_phases_do_not_add() -> None:
    # 4 nodes x 2: chunks flow through the chains and the NIC tree at once: S / B_bottleneck = 1 s
    # (not the 0.1 s intra RS + AG on top of the tree's 1 s)
    sizes, intra, inter = [2] * 4, [FAST] * 4, [NIC] * 4
    assert tree_allreduce_s(GB, sizes, intra, inter) == pytest.approx(1.0)
    assert hierarchical_allreduce_s(GB, sizes, intra, inter) == pytest.approx(0.1 + 2 * 3 / 4)  # ring across: 1.5 s
    assert ring_allreduce_s(GB, sizes, intra, inter) == pytest.approx(2 * 7 / 8)
    # a chain link slower than the NIC is the bottleneck: every chain link carries ~S
    slow_pcie = [Link(0.5e9, 0.0)] * 4
    assert tree_allreduce_s(GB, sizes, slow_pcie, inter) == pytest.approx(2.0)
    # latency grows with the tree's depth: 2 ceil(log2 N) steps
    lat = [Link(1e9, 1e-3)]
    for nodes, depth in [(2, 1), (3, 2), (4, 2), (5, 3), (16, 4)]:
        assert tree_allreduce_s(0.0, [1] * nodes, [FAST] * nodes, lat * nodes) == pytest.approx(2 * depth * 1e-3)
    assert tree_allreduce_s(GB, [4], [FAST], [NIC]) == ring_allreduce_s(GB, [4], [FAST], [NIC])  # one node: ring


def test_tree_latency_is_the_longest_paths() -> None:
    # path = the d+1 largest nodes; each pays (g-1) chain hops up and down, plus d NIC hops each way
    intra, inter = Link(1e30, 1e-5), Link(1e30, 1e-3)
    # 3 nodes (d = 2): all three on the path: 2 * ((3 + 0 + 0) * 1e-5 + 2 * 1e-3)
    assert tree_allreduce_s(0.0, [1, 1, 4], [intra] * 3, [inter] * 3) == pytest.approx(2 * (3e-5 + 2e-3))
    assert tree_allreduce_s(0.0, [4, 4, 4], [intra] * 3, [inter] * 3) == pytest.approx(2 * (9e-5 + 2e-3))
    # 5 nodes (d = 3): the 4 largest of 4, 1, 3, 2, 2 -> 3 + 2 + 1 + 1 = 7 hops
    assert tree_allreduce_s(0.0, [4, 1, 3, 2, 2], [intra] * 5, [inter] * 5) == pytest.approx(2 * (7e-5 + 3e-3))


def test_pipeline_fill_closed_forms() -> None:
    phi = 0.02
    # ring, 2 nodes x 2 at the NIC: 2(n-1) = 6 stages -> + 5 phi S / B
    assert ring_allreduce_s(GB, [2, 2], [FAST] * 2, [NIC] * 2, phi) == pytest.approx(1.5 + 5 * phi)
    # tree, nodes 1, 1, 4 (d = 2, 3 chain hops): 2 (3 + 2) = 10 stages -> S/B + 9 phi S / B
    assert tree_allreduce_s(GB, [1, 1, 4], [FAST] * 3, [NIC] * 3, phi) == pytest.approx(1.0 + 9 * phi)
    assert tree_allreduce_s(GB, [4, 4, 4], [FAST] * 3, [NIC] * 3, phi) == pytest.approx(1.0 + 21 * phi)
    # hierarchical, 2 nodes x 2: 2 (2-1) + 2 (2-1) = 4 stages at the NIC -> + 3 phi S / B
    assert hierarchical_allreduce_s(GB, [2, 2], [FAST] * 2, [NIC] * 2, phi) == pytest.approx(1.1 + 3 * phi)
    # phi = 1: store-and-forward, the tree's stages add up (each a whole S / B)
    assert tree_allreduce_s(GB, [1, 1, 1], [FAST] * 3, [NIC] * 3, 1.0) == pytest.approx(4.0)
    # phi = 0 is the classic formula, bit for bit
    for algorithm in ("ring", "hierarchical", "tree", "nccl"):
        assert allreduce_s(GB, [2, 3, 1], [FAST] * 3, [NIC] * 3, algorithm=algorithm, chunk_share=0.0) == allreduce_s(
            GB, [2, 3, 1], [FAST] * 3, [NIC] * 3, algorithm=algorithm)
    with pytest.raises(ValueError, match="chunk share"):
        ring_allreduce_s(GB, [2], [FAST], [NIC], 1.5)


def test_nccl_picks_the_flat_ring_on_two_nodes_and_the_tree_beyond() -> None:
    for sizes in ([4], [4, 4], [1, 3]):
        k = len(sizes)
        assert allreduce_s(GB, sizes, [FAST] * k, [NIC] * k, algorithm="nccl") == ring_allreduce_s(
            GB, sizes, [FAST] * k, [NIC] * k)
    for sizes in ([1, 1, 1], [4, 4, 4, 4], [1, 2, 1, 2]):
        k = len(sizes)
        assert allreduce_s(GB, sizes, [FAST] * k, [NIC] * k, algorithm="nccl") == tree_allreduce_s(
            GB, sizes, [FAST] * k, [NIC] * k)


def test_latencies_per_step() -> None:
    intra, inter = [Link(1e10, 1e-5)] * 2, [Link(1e9, 1e-3)] * 2
    # ring: 2(n-1) steps, each as slow as its slowest hop's latency (the NIC's)
    assert ring_allreduce_s(0.0, [3, 3], intra, inter) == pytest.approx(2 * 5 * 1e-3)
    # hierarchical: 2 x (g-1) intra steps + 2(N-1) inter steps
    assert hierarchical_allreduce_s(0.0, [3, 3], intra, inter) == pytest.approx(2 * 2 * 1e-5 + 2 * 1 * 1e-3)


def test_one_slow_nic_dominates() -> None:
    sizes, intra = [2, 2, 2], [FAST] * 3
    base_ring = ring_allreduce_s(GB, sizes, intra, [NIC] * 3)
    base_hier = hierarchical_allreduce_s(GB, sizes, intra, [NIC] * 3)
    slow = [NIC, Link(0.25e9, 0.0), NIC]  # node 1's NIC at a quarter
    assert ring_allreduce_s(GB, sizes, intra, slow) == pytest.approx(4 * base_ring)
    # hierarchical: only the inter-node part (2 * 2/3 s) slows down
    inter_part = 2 * 2 / 3 * GB / 1e9
    assert hierarchical_allreduce_s(GB, sizes, intra, slow) == pytest.approx(base_hier + 3 * inter_part)


def test_uneven_nodes() -> None:
    # nodes of 1, 2, 1, 2 (Pollux placement 1212): ring over 6 ranks at the NIC
    sizes = [1, 2, 1, 2]
    assert ring_allreduce_s(GB, sizes, [FAST] * 4, [NIC] * 4) == pytest.approx(2 * 5 / 6)
    # hierarchical: the 2-GPU nodes' RS/AG (1/2 * 0.1 s each), 4-node AR 2 * 3/4 s
    assert hierarchical_allreduce_s(GB, sizes, [FAST] * 4, [NIC] * 4) == pytest.approx(2 * 0.05 + 1.5)


def test_one_rank_costs_nothing() -> None:
    assert allreduce_s(GB, [1], [FAST], [NIC]) == 0.0
    assert allreduce_s(GB, [1], [FAST], [NIC], algorithm="hierarchical") == 0.0


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="bandwidth"):
        Link(0.0, 0.0)
    with pytest.raises(ValueError, match="latency"):
        Link(1.0, -1.0)
    with pytest.raises(ValueError, match="one intra and one inter"):
        ring_allreduce_s(GB, [2, 2], [FAST], [NIC, NIC])
    with pytest.raises(ValueError, match="at least one"):
        ring_allreduce_s(GB, [2, 0], [FAST] * 2, [NIC] * 2)
    with pytest.raises(ValueError, match="valid: ring, hierarchical, tree, nccl"):
        allreduce_s(GB, [2], [FAST], [NIC], algorithm="butterfly")  # type: ignore[arg-type]


def test_contention_slows_the_nodes_links_at_their_most_slowed_worker() -> None:
    topo = Topology((2, 1), (NIC, NIC), (FAST, FAST))
    intra, inter = topo.links([1.0, 3.0, 2.0])
    assert [x.bandwidth_bytes_per_s for x in inter] == [1e9 / 3.0, 1e9 / 2.0]
    assert [x.bandwidth_bytes_per_s for x in intra] == [1e10 / 3.0, 1e10 / 2.0]
    assert topo.node_of == (0, 0, 1)
    assert list(topo.members(1)) == [2]


links = st.builds(Link, st.floats(1e6, 1e11), st.floats(0.0, 1e-2))


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(st.tuples(st.integers(1, 5), links, links), min_size=1, max_size=6),
    factors_seed=st.lists(st.floats(1.0, 5.0), min_size=30, max_size=30),
    s=st.floats(0.0, 1e9),
    algorithm=st.sampled_from(["ring", "hierarchical", "tree", "nccl"]),
    phi=st.sampled_from([0.0, 0.02, 1.0]),
)
def test_the_engines_plan_is_the_link_formula(nodes, factors_seed, s, algorithm, phi) -> None:
    """AllReducePlan (what both engines call) == allreduce_s on the contended links, exactly."""
    sizes = tuple(g for g, _, _ in nodes)
    topo = Topology(sizes, tuple(x for _, x, _ in nodes), tuple(y for _, _, y in nodes))
    factors = factors_seed[: topo.n_workers]
    plan = AllReducePlan(topo, algorithm, phi)
    intra, inter = topo.links(factors)
    assert plan.duration_s(s, factors) == allreduce_s(s, sizes, intra, inter, algorithm=algorithm, chunk_share=phi)


@settings(max_examples=100, deadline=None)
@given(g=st.integers(2, 8), nodes=st.integers(2, 6), s=st.floats(1e3, 1e9))
def test_hierarchical_beats_a_flat_ring_when_the_nic_is_the_bottleneck(g, nodes, s) -> None:
    """Same NICs, fast intra links: the flat ring moves 2(n-1)/n S over the NIC, hierarchical 2(N-1)/N S."""
    intra, inter = [Link(1e12, 0.0)] * nodes, [Link(1e9, 0.0)] * nodes
    assert hierarchical_allreduce_s(s, [g] * nodes, intra, inter) < ring_allreduce_s(s, [g] * nodes, intra, inter)


def test_the_algorithm_table_is_the_scenarios_choice() -> None:
    """One table: the scenario's valid values, the link-only algorithms the fit tries, the error's list."""
    from typing import get_args

    from lbsim.network.algorithms import ALGORITHMS, ALLREDUCE, NetworkAlgorithm
    from lbsim.scenario.sections import AllReduceConfig

    assert get_args(NetworkAlgorithm) == tuple(ALLREDUCE) == ("ring", "hierarchical", "tree", "nccl", "nccl_fitted")
    assert AllReduceConfig.__dataclass_fields__["algorithm"].type == "NetworkAlgorithm"
    assert ALGORITHMS == ("ring", "hierarchical", "tree", "nccl")
    with pytest.raises(ValueError, match="valid: ring, hierarchical, tree, nccl, nccl_fitted"):
        allreduce_s(GB, [2], [FAST], [NIC], algorithm="butterfly")


def test_an_algorithm_without_a_closed_form_on_links_is_timed_by_its_engine_form() -> None:
    """``allreduce_s`` of nccl_fitted (no hand-written link form) = the engines' plan with no contention."""
    from lbsim.network.nccl import NcclFigures, ProtocolFigures, allreduce_time_s

    protocols = (ProtocolFigures(5e-6, 1e-6, 4e-6, 0.3), ProtocolFigures(5e-6, 1e-6, 4e-6, 0.6),
                 ProtocolFigures(5e-6, 1e-6, 4e-6, 0.9))

    def figures(intra: float, inter: float) -> NcclFigures:
        return NcclFigures(protocols, intra, inter, 1)

    sizes, intra, inter = [4, 2], [Link(2e10, 0.0)] * 2, [Link(5e9, 0.0)] * 2
    got = allreduce_s(GB, sizes, intra, inter, algorithm="nccl_fitted", nccl=figures)
    assert got == allreduce_time_s(figures(2e10, 5e9), 6, 2, GB, 4)
    plan = AllReducePlan(Topology((4, 2), tuple(inter), tuple(intra)), "nccl_fitted", nccl=figures)
    assert plan.duration_s(GB, [1.0] * 6) == got


def test_a_new_algorithm_is_one_class_and_one_table_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A star through the first node's NIC (``T = 2 (n−1) S / (n B_0 / F_0)``), added to the table alone:
    the engines' plan times it under contention and ``allreduce_s`` derives its form on links from it."""
    import numpy as np

    from lbsim.network.algorithms import ALLREDUCE, AllReduceAlgorithm, NodeLinks, Options, Timer

    class Star(AllReduceAlgorithm):
        def timer(self, links: NodeLinks, options: Options) -> Timer:
            n, hub = links.n, float(links.nic_bw[0])
            return lambda s, node_factors: 2 * (n - 1) * s / (n * hub / float(node_factors[0]))

    monkeypatch.setitem(ALLREDUCE, "star", Star())  # type: ignore[index]
    topo = Topology((2, 2), (NIC, NIC), (FAST, FAST))
    plan = AllReducePlan(topo, "star")
    assert plan.duration_s(GB, [1.0, 2.0, 1.0, 1.0]) == pytest.approx(2 * 3 * GB / (4 * NIC.bandwidth_bytes_per_s / 2.0))
    assert allreduce_s(GB, [2, 2], [FAST] * 2, [NIC] * 2, algorithm="star") == plan.duration_s(GB, np.ones(4))
