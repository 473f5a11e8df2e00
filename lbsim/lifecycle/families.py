"""Scheme families and the network variant of a scenario each family runs on (a cross-family compare).

Two families of schemes run on two kinds of network:

* **parameter-server schemes** — no global barrier (ASP, SSP, DSSP, ElasticBSP, WBSP), or a
  barrier whose late gradients the server drops (BSP with backup workers):
  :func:`lbsim.schemes.registry.needs_parameter_server`;
* **all-reduce schemes** — every other synchronous scheme (BSP, static, LB-BSP, LOFT): what PyTorch
  DDP does, gradients averaged by an all-reduce over the nodes' links.

A scenario's ``network:`` section is one or the other. To run both families on one scenario,
:func:`network_variant` derives the other kind of network from the scenario, keeping its cluster
(nodes, links, contention), workload and seed, by these rules:

* **all-reduce → parameter server** (``parameter_server``): ``shards`` = the number of worker nodes
  (one server shard per worker node, as BytePS and sharded PS deployments size them), each with
  ``server_bandwidth_gbps`` = the fastest worker node's NIC (the all-reduce's ``bandwidth_gbps`` where
  it sets every NIC), so the servers' aggregate bandwidth k·B_ps is at least the workers' and the
  server NIC is not the bottleneck by construction (T_PS ≈ 2α + max(2S/B_worker, 2nS/(k B_ps)));
  ``latency_s`` = the all-reduce's per-hop latency ``alpha_s``; ``apply_s`` = the parameter server's
  default (:class:`~lbsim.scenario.sections.ParameterServerConfig`). Where the all-reduce sets one
  ``bandwidth_gbps`` for every NIC, every group gets it as its own ``bandwidth_gbps``, so the workers
  keep the links they had.
* **parameter server → all-reduce** (``ring_allreduce``): the flat ``ring`` over the nodes' own NICs
  (``bandwidth_gbps`` null: each group's catalog or inline figure, the links the parameter-server
  scenario's workers use), ``alpha_s`` = the server's one-way ``latency_s``, no pipeline fill
  (``chunk_share`` 0) — the all-reduce section's defaults otherwise.

A scenario already of the wanted kind is returned as it is. The user overrides any derived key with
``KIND.KEY=VALUE`` (``--network-variant parameter_server.shards=8`` on the command line,
``network_variant={"parameter_server.shards": 8}`` in Python), applied after the rules; a key for the
kind the scenario already has is refused (change the scenario's own section with ``--set network.KEY=...``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from lbsim.errors import InputError
from lbsim.scenario.overrides import parse_override
from lbsim.scenario.resolve import resolve_workers
from lbsim.scenario.schema import Scenario
from lbsim.scenario.sections import AllReduceConfig, ParameterServerConfig
from lbsim.schemes.registry import needs_parameter_server

PARAMETER_SERVER = ParameterServerConfig.kind
ALLREDUCE = AllReduceConfig.kind
NETWORK_KINDS = (PARAMETER_SERVER, ALLREDUCE)


def scheme_network(scheme_config: Any) -> str:
    """The kind of network the scheme's family runs on: ``parameter_server`` or ``ring_allreduce``."""
    return PARAMETER_SERVER if needs_parameter_server(scheme_config) else ALLREDUCE


def network_kind(scenario: Scenario) -> str:
    """The kind of the scenario's own network section."""
    return str(scenario.network.kind)


def network_variant(scenario: Scenario, kind: str) -> Scenario:
    """``scenario`` on a network of ``kind``, derived by the rules of the module docstring (pure).

    The result is not checked (a scheme of the other family may sit in it); the lifecycle loads it
    through the scenario checks like any other.
    """
    net = scenario.network
    if net.kind == kind:
        return scenario
    if isinstance(net, AllReduceConfig):  # -> parameter server
        workers = resolve_workers(scenario)
        nodes = len({w.node for w in workers})
        nic_gbps = net.bandwidth_gbps if net.bandwidth_gbps is not None else max(w.bandwidth_gbps for w in workers)
        ps = ParameterServerConfig(shards=nodes, server_bandwidth_gbps=nic_gbps, latency_s=net.alpha_s)
        cluster = scenario.cluster
        if net.bandwidth_gbps is not None:  # the all-reduce set every NIC: the groups keep that link
            cluster = replace(cluster, groups=tuple(replace(g, bandwidth_gbps=net.bandwidth_gbps) for g in cluster.groups))
        return replace(scenario, network=ps, cluster=cluster)
    if isinstance(net, ParameterServerConfig):  # -> all-reduce
        return replace(scenario, network=AllReduceConfig(alpha_s=net.latency_s))
    raise ValueError(f"no rule derives a {kind} network from {net.kind}")


def variant_keys(keys: Sequence[str], option: str = "--network-variant") -> dict[str, list[str]]:
    """``KIND.KEY=VALUE`` strings grouped by kind as ``network.KEY=VALUE`` overrides (checked: a known kind)."""
    out: dict[str, list[str]] = {kind: [] for kind in NETWORK_KINDS}
    for text in keys:
        parts, _value = parse_override(text)
        if len(parts) < 2 or parts[0] not in out:
            raise InputError(option, f"expected KIND.KEY=VALUE with KIND one of {', '.join(NETWORK_KINDS)} "
                                     f"(e.g. parameter_server.shards=8), got {text.split('=')[0]!r}")
        out[parts[0]].append("network." + text.strip().split(".", 1)[1])
    return out
