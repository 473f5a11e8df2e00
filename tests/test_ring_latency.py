"""The flat ring's latency paid along its path (``ring_latency: path``): analytic values, the engines' plan agrees."""

from __future__ import annotations

import pytest

from lbsim.network.algorithms import allreduce_s
from lbsim.network.collectives import Link, ring_allreduce_s
from lbsim.network.ring_latency import ring_hop_latency_sum
from lbsim.network.topology import AllReducePlan, Topology

S = 8e7
INTRA = Link(1e10, 1e-5)
NIC = Link(1e9, 1e-3)


def test_two_nodes_of_four_pay_four_nic_latencies_not_fourteen() -> None:
    sizes = [4, 4]
    intra, inter = [INTRA] * 2, [NIC] * 2
    n = 8
    # 8 hops: 3 inside each node, one NIC leaving each; each paid 2(n-1)/n times
    want = 2 * (n - 1) / n * (2 * 3 * 1e-5 + 2 * 1e-3) + 2 * (n - 1) / n * S / 1e9
    assert ring_allreduce_s(S, sizes, intra, inter, ring_latency="path") == pytest.approx(want, rel=1e-12)
    slowest = 2 * (n - 1) * (1e-3 + S / n / 1e9)  # every step at the NIC's latency
    assert ring_allreduce_s(S, sizes, intra, inter) == pytest.approx(slowest, rel=1e-12)
    # more GPUs per node add intra-node latencies only: 88 pays the same NIC latency share as 44
    assert ring_hop_latency_sum([8, 8], [1e-5] * 2, [1e-3] * 2) == pytest.approx(14 * 1e-5 + 2e-3)


@pytest.mark.parametrize("sizes", [[1, 1, 1], [3], [2, 2]])
def test_one_latency_for_every_hop_gives_the_classic_ring_exactly(sizes: list[int]) -> None:
    link = Link(1e9, 1e-4)
    intra, inter = [link] * len(sizes), [link] * len(sizes)
    a = ring_allreduce_s(S, sizes, intra, inter, ring_latency="path")
    assert a == ring_allreduce_s(S, sizes, intra, inter)  # the same floating-point operations


@pytest.mark.parametrize("sizes", [[4, 4], [1, 2, 3], [8, 8], [1, 1], [4]])
@pytest.mark.parametrize("algorithm", ["ring", "nccl"])
def test_engine_plan_agrees_with_the_closed_form(sizes: list[int], algorithm: str) -> None:
    intra, inter = tuple([INTRA] * len(sizes)), tuple([NIC] * len(sizes))
    plan = AllReducePlan(Topology(tuple(sizes), inter, intra), algorithm, 0.02, ring_latency="path")  # type: ignore[arg-type]
    want = allreduce_s(S, sizes, list(intra), list(inter), algorithm=algorithm, chunk_share=0.02,  # type: ignore[arg-type]
                       ring_latency="path")
    assert plan.duration_s(S, [1.0] * sum(sizes)) == pytest.approx(want, rel=1e-12)
