"""Communication: a parameter server with a shared NIC and serial apply queue, or a ring.

Parameter server (``k`` shards, each with a NIC of ``B_ps`` per direction):
* A transfer of S bytes between worker w and the server needs the server side for
  ``S / (k B_ps)`` (a FIFO queue per direction: pushes in, pulls out — the shared bottleneck) and
  cannot finish before ``S / B_w(t)`` after it was requested (the worker's own link, slowed by
  network contention). Plus one latency. With n workers pushing at once the last push ends at
  ``max(n S / (k B_ps), S / B_w)`` — the textbook PS bound.
* The server applies gradients one at a time, ``apply_s / k`` each (a serial resource).

Ring all-reduce (alpha-beta): ``T = 2(n-1) alpha + 2 (n-1)/n * S / B_min``, with ``B_min`` the
slowest worker's effective bandwidth at the moment the ring starts (the ring runs at its slowest
hop).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from lbsim.scenario.sections import ParameterServerConfig, RingAllReduceConfig


def bytes_per_s(gbps: float) -> float:
    return gbps * 1e9 / 8.0


class ParameterServer:
    def __init__(self, env: Any, config: ParameterServerConfig) -> None:
        self.env = env
        self.config = config
        self.nic_in = simpy.Resource(env, capacity=1)
        self.nic_out = simpy.Resource(env, capacity=1)
        self.applier = simpy.Resource(env, capacity=1)
        self.server_hold_s = env.gradient_bytes / (config.shards * bytes_per_s(config.server_bandwidth_gbps))
        self.apply_each_s = config.apply_s / config.shards

    def _transfer(self, worker: int, nic: simpy.Resource) -> Generator[Any, Any, None]:
        env = self.env
        requested = env.now
        own_s = env.gradient_bytes * env.contention[worker].network_factor(requested) / bytes_per_s(
            env.workers[worker].bandwidth_gbps
        )
        with nic.request() as req:
            yield req
            yield env.timeout(self.server_hold_s)
        left = requested + own_s - env.now
        yield env.timeout(max(0.0, left) + self.config.latency_s)

    def push(self, worker: int) -> Generator[Any, Any, None]:
        """Send one gradient to the server (returns when it has arrived)."""
        yield from self._transfer(worker, self.nic_in)

    def pull(self, worker: int) -> Generator[Any, Any, None]:
        """Fetch the current weights from the server."""
        yield from self._transfer(worker, self.nic_out)

    def apply(self) -> Generator[Any, Any, None]:
        """Wait for the serial apply queue, then apply one gradient."""
        with self.applier.request() as req:
            yield req
            yield self.env.timeout(self.apply_each_s)


def ring_allreduce_s(env: Any, config: RingAllReduceConfig, members: range | list[int]) -> float:
    """Duration of one ring all-reduce among ``members`` starting now."""
    n = len(members)
    if n <= 1:
        return 0.0
    now = env.now
    if config.bandwidth_gbps is not None:
        worst = max(env.contention[w].network_factor(now) for w in members)
        bw = bytes_per_s(config.bandwidth_gbps) / worst
    else:
        bw = min(bytes_per_s(env.workers[w].bandwidth_gbps) / env.contention[w].network_factor(now) for w in members)
    return 2 * (n - 1) * config.alpha_s + 2 * (n - 1) / n * env.gradient_bytes / bw
