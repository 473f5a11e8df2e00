"""Measure the parameter server's costs on this machine, for ``lbsim profile`` / ``validate``.

Each worker in turn makes ``PS_PROBE_REPS`` back-to-back round trips with the server — a push (header + payload) answered by a reply with weights, the messages of
:mod:`lbsim.runtime.ps_protocol` — at two payload sizes: the model's gradient ``S`` and a large one.
While one worker probes, the others run training steps (``busy``) until the server tells them it
is done, as during a run, where every worker computes while another one's messages are in
flight: on a machine with fewer cores than ranks the messages then wait for a core, and that is
part of what a push costs there (an idle machine's round trip would be several times faster).
The simulator's parameter server charges a round trip ``2 S / B + 2 L`` (server NIC, then the
one-way latency, each direction), so the slope between the two sizes gives ``B`` and the
small size then gives ``L``, the per-message overhead of the messaging stack. The server also
times applying a gradient of ``S`` (the SGD step, ``apply_s``). Workers' round trips are
pooled (mean over workers of each one's mean).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from .dist import Comm, RankInfo
from .ps_protocol import Channel

PS_PROBE_REPS = 12
PS_PROBE_BYTES = 8 * 2**20
TAG_DONE = 15


def ps_probe(info: RankInfo, comm: Comm, workers: int, n_params: int, dtype: torch.dtype,
             busy: Callable[[], object] | None = None) -> dict[str, Any] | None:
    """Run the probe on every rank of the world (workers ``0..workers-1``, server ``workers``); rank 0 gets the figures.

    ``busy``: one training step, which a worker repeats while another one probes.
    """
    server = workers
    elem = torch.tensor([], dtype=dtype).element_size()
    sizes = {"small": max(1, n_params), "big": max(PS_PROBE_BYTES // elem, 16 * n_params)}
    mine = torch.zeros(3, dtype=torch.float64)  # worker: round trip small, big; server: apply_s
    for slot, (_label, numel) in enumerate(sizes.items()):
        chan = Channel(info.rank, server, numel, dtype)
        payload = torch.zeros(numel, dtype=dtype)
        for w in range(workers):
            comm.barrier("PS probe barrier")
            if info.rank == w:
                chan.push({"iteration": -1}, payload, -1)  # one untimed round trip (connections, buffers)
                chan.reply_of(payload, -1)
                t = time.monotonic()
                for _ in range(PS_PROBE_REPS):
                    chan.push({"iteration": -1}, payload, -1)
                    chan.reply_of(payload, -1)
                mine[slot] = (time.monotonic() - t) / PS_PROBE_REPS
            elif info.rank == server:
                for _ in range(PS_PROBE_REPS + 1):
                    src, _h, got = chan.next_push(-1)
                    chan.reply(src, {}, got, -1)
                for v in range(workers):
                    if v != w:
                        dist.send(torch.ones(1), v, tag=TAG_DONE)
            else:  # compute until the server says the probe is over (a thread waits for its word:
                # a gloo irecv's is_completed() does not turn true before wait())
                done = threading.Event()
                waiter = threading.Thread(target=_wait_done, args=(server, done), daemon=True)
                waiter.start()
                while not done.is_set():
                    if busy is not None:
                        busy()
                    else:
                        done.wait(0.001)
                waiter.join()
    if info.rank == server:
        weights = torch.zeros(n_params, dtype=dtype)
        g = torch.full((n_params,), 1e-6, dtype=dtype)
        weights.sub_(g, alpha=0.1)
        t = time.monotonic()
        for _ in range(PS_PROBE_REPS):
            weights.sub_(g, alpha=0.1)
        mine[2] = (time.monotonic() - t) / PS_PROBE_REPS
    table = comm.all_gather(mine, "all_gather of the PS probe", -1)
    if info.rank != 0:
        return None
    rtt = table[:workers, :2].mean(dim=0).tolist()
    return {"small_bytes": sizes["small"] * elem, "small_rtt_s": rtt[0], "big_bytes": sizes["big"] * elem,
            "big_rtt_s": rtt[1], "apply_s": float(table[server, 2]), "workers_rtt_s": table[:workers, :2].tolist()}


def _wait_done(server: int, done: threading.Event) -> None:
    flag = torch.zeros(1)
    try:
        dist.recv(flag, server, tag=TAG_DONE)
    finally:
        done.set()
