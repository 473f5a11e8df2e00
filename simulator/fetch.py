"""The data-fetch stage: reading a batch's samples before compute (scenarios with ``data:``).

Cost model in :mod:`lbsim.fetch`. A worker reads its ``r`` remote samples first: on its own
link for ``r s f_net(t) / B_remote`` (``f_net`` sampled when the read is requested) and, when
the scenario has a storage node, through that node's NIC — a FIFO queue shared by every
worker, held ``r s / B_storage`` per read (the parameter server's NIC model). The read ends at
the later of the two, plus the remote latency. Then its ``l`` local samples at ``B_local``.
(:func:`lbsim.fetch.fetch_schedule` is the same queue for requests made together; why it is not
called here: :mod:`lbsim.fetch`.)

Which samples are local: the scheme's choice when it implements
:class:`~lbsim.schemes.base.LocalityAware` (LOFT), else uniform sampling from the whole dataset
(``round(b f_i)`` local, :meth:`lbsim.fetch.DataLayout.default_local`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import simpy

from lbsim.fetch import DataLayout
from lbsim.schemes.base import local_counts


class Fetcher:
    def __init__(self, env: Any, layout: DataLayout) -> None:
        self.env = env
        self.layout = layout
        self.nic = simpy.Resource(env, capacity=1) if layout.storage_gbps is not None else None

    def local_samples(self, batches: Sequence[int], scheme: object | None = None) -> tuple[int, ...]:
        """Local samples of each worker's batch: the scheme's split if it decides one, else uniform."""
        return local_counts(scheme, self.layout, batches)

    def fetch(self, worker: int, local: int, remote: int) -> Generator[Any, Any, None]:
        """Read ``remote`` samples from the storage node, then ``local`` from the worker's shard."""
        env, lay = self.env, self.layout
        if remote > 0:
            requested = env.now
            own_s = remote * lay.remote_s_per_sample(worker, env.contention[worker].network_factor(requested))
            if self.nic is not None:
                with self.nic.request() as req:
                    yield req
                    yield env.timeout(remote * lay.storage_s_per_sample())
                own_s = max(0.0, requested + own_s - env.now)  # what is left of the link time
            yield env.timeout(own_s + lay.remote_latency_s(worker))
        if local > 0:
            yield env.timeout(local * lay.local_s_per_sample(worker))
