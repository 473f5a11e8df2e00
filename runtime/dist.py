"""Process-group set-up, collectives that say which one failed, heartbeats and the failure hook.

Every collective the runtime makes goes through :class:`Comm`, which turns a torch.distributed
error (a peer closed its connection, the group's timeout expired) into :class:`CollectiveError`
naming this rank, the collective and the round. Such an error is *secondary*: the launcher looks
for the rank that failed first (an exception of its own, a death without a report, or the rank
that stopped making progress) and names that one (:mod:`lbsim.runtime.launch`).

Ranks find each other through a rendezvous with an explicit rank and world size: the launcher's
ranks through a file in the launch's own private folder (``file://``; no port is picked and
released, which another process could take in between), ``torchrun``'s through
``env://`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``).
``timeout_s`` bounds every collective, so a crashed or hung peer ends the run.

Devices: a rank computes on ``RankInfo.device`` and communicates on ``RankInfo.comm_device``. NCCL
communicates CUDA tensors in place. Gloo reduces and broadcasts CUDA tensors but cannot gather
them, so with gloo every collective goes through host memory: :class:`Comm` copies a tensor to the
CPU, runs the collective and copies the result back (``--backend gloo --device cuda``: several
ranks sharing one GPU, round-robin by local rank, each computing on it with CUDA tensors).

The failure hook is for tests and demonstrations only: ``LBSIM_RUNTIME_FAIL=RANK:ROUND[:MODE]``
makes rank RANK fail when it starts round ROUND of a training loop, with MODE ``raise`` (a Python
exception, the default), ``exit`` (the process dies without a report) or ``hang`` (it stops).
"""

from __future__ import annotations

import datetime
import os
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from .config import RENDEZVOUS_ENV

FAIL_ENV = "LBSIM_RUNTIME_FAIL"


class CollectiveError(RuntimeError):
    """A collective failed on this rank because of another rank (crash, hang) or the network."""

    def __init__(self, rank: int, what: str, round_: int, cause: BaseException) -> None:
        msg = " ".join(str(cause).split())[:300]
        super().__init__(f"rank {rank}: {what} of round {round_} failed: {type(cause).__name__}: {msg}")
        self.rank = rank


class InjectedFailure(RuntimeError):
    """The failure asked for by ``LBSIM_RUNTIME_FAIL``."""


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world: int
    local_rank: int
    backend: str
    device: torch.device

    @property
    def comm_device(self) -> torch.device:
        """Where this rank's collectives run: the compute device under NCCL, host memory under gloo."""
        return self.device if self.backend == "nccl" else torch.device("cpu")


def rank_device(device: str, local_rank: int) -> torch.device:
    """The device a rank computes on: the CPU, or GPU ``local_rank mod (GPUs here)`` (made current).

    With NCCL there is one GPU per rank (checked before launch), so this is GPU ``local_rank``; with
    gloo several ranks may share a GPU."""
    if device != "cuda":
        return torch.device("cpu")
    dev = torch.device("cuda", local_rank % max(1, torch.cuda.device_count()))
    torch.cuda.set_device(dev)
    return dev


def init_group(*, rank: int, world: int, local_rank: int, init_method: str, backend: str, timeout_s: float,
               device: str = "cpu") -> RankInfo:
    """Join the process group; ``device``: ``cpu`` or ``cuda`` (the options' compute device)."""
    dev = rank_device(device, local_rank)
    dist.init_process_group(
        backend, init_method=init_method, rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return RankInfo(rank, world, local_rank, backend, dev)


def env_rank() -> dict[str, Any]:
    """The rendezvous that ``torchrun`` (or a user) put in the environment."""
    missing = [k for k in RENDEZVOUS_ENV if k not in os.environ]
    if missing:
        raise RuntimeError(f"not started by torchrun: {', '.join(missing)} not set in the environment")
    return {
        "rank": int(os.environ["RANK"]),
        "world": int(os.environ["WORLD_SIZE"]),
        "local_rank": int(os.environ.get("LOCAL_RANK", os.environ["RANK"])),
        "master_addr": os.environ["MASTER_ADDR"],
        "master_port": int(os.environ["MASTER_PORT"]),
    }


class Heartbeat:
    """Progress of this rank (rounds done) and of the job, for the launcher's diagnosis and bar."""

    def __init__(self, shared: Any = None, rank: int = 0) -> None:
        self.shared = shared  # multiprocessing Array('d', world + 1) in spawn mode; None under torchrun
        self.rank = rank
        self.round = 0

    def beat(self, round_: int) -> None:
        """Record that this rank reached round ``round_``."""
        self.round = round_
        if self.shared is not None:
            self.shared[self.rank] = float(round_)

    def progress(self, fraction: float) -> None:
        """The job's progress, from the rank that holds the scheme (rank 0, or the parameter server)."""
        if self.shared is not None:
            self.shared[len(self.shared) - 1] = fraction


class Comm:
    """The collectives of the runtime, with errors that name the rank, the collective and the round.

    ``group``: the process group they run on (None: every rank). A job that also runs a
    parameter-server scheme has one rank more than workers; its synchronous tasks run on the
    workers' group, whose ranks are the workers' (``info`` is then that group's view).
    """

    def __init__(self, info: RankInfo, group: Any = None) -> None:
        self.info = info
        self.group = group

    def _call(self, what: str, round_: int, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - any failure inside a collective is reported the same way
            raise CollectiveError(self.info.rank, what, round_, err) from err

    def _in_place(self, t: torch.Tensor, what: str, round_: int, fn: Any, *args: Any, **kwargs: Any) -> None:
        """``fn(t, ...)`` on the communication device, the result written back into ``t``."""
        dev = self.info.comm_device
        if t.device == dev:
            self._call(what, round_, fn, t, *args, **kwargs)
            return
        moved = t.to(dev)
        self._call(what, round_, fn, moved, *args, **kwargs)
        t.copy_(moved)

    def all_gather(self, t: torch.Tensor, what: str, round_: int) -> torch.Tensor:
        """Every rank's ``t``, stacked (on the communication device)."""
        t = t.to(self.info.comm_device)
        out = [torch.empty_like(t) for _ in range(self.info.world)]
        self._call(what, round_, dist.all_gather, out, t, group=self.group)
        return torch.stack(out)

    def all_reduce(self, t: torch.Tensor, what: str, round_: int) -> None:
        """Sum ``t`` over the ranks, in place."""
        self._in_place(t, what, round_, dist.all_reduce, op=dist.ReduceOp.SUM, group=self.group)

    def broadcast(self, t: torch.Tensor, what: str, round_: int = -1) -> None:
        """Rank 0's ``t`` to every rank, in place."""
        self._in_place(t, what, round_, dist.broadcast, 0, group=self.group)

    def all_to_all(self, recv: torch.Tensor, send: torch.Tensor, what: str, round_: int) -> None:
        """``all_to_all_single``: equal chunks of ``send`` to every rank, theirs into ``recv``."""
        dev = self.info.comm_device
        out = recv if recv.device == dev else torch.empty_like(recv, device=dev)
        self._call(what, round_, dist.all_to_all_single, out, send.to(dev), group=self.group)
        if out is not recv:
            recv.copy_(out)

    def broadcast_object(self, obj: Any, what: str) -> Any:
        """Rank 0's ``obj`` on every rank."""
        box = [obj]
        self._call(what, -1, dist.broadcast_object_list, box, 0, group=self.group, device=self.info.comm_device)
        return box[0]

    def barrier(self, what: str, round_: int = -1) -> None:
        """Wait until every rank is here."""
        if self.info.backend == "nccl":
            self._call(what, round_, dist.barrier, group=self.group, device_ids=[self.info.local_rank])
        else:
            self._call(what, round_, dist.barrier, group=self.group)


class FailureHook:
    """``LBSIM_RUNTIME_FAIL=RANK:ROUND[:MODE]`` (tests only): fail on purpose at a given round."""

    def __init__(self, rank: int) -> None:
        self.target: tuple[int, int, str] | None = None
        spec = os.environ.get(FAIL_ENV, "").strip()
        if spec:
            parts = spec.split(":")
            mode = parts[2] if len(parts) > 2 else "raise"
            if len(parts) < 2 or mode not in ("raise", "exit", "hang"):
                raise ValueError(f"{FAIL_ENV}={spec!r}: expected RANK:ROUND[:raise|exit|hang]")
            if int(parts[0]) == rank:
                self.target = (rank, int(parts[1]), mode)

    def check(self, round_: int) -> None:
        if self.target is None or round_ != self.target[1]:
            return
        mode = self.target[2]
        if mode == "exit":
            os._exit(3)
        if mode == "hang":
            while True:
                time.sleep(3600)
        raise InjectedFailure(f"injected failure ({FAIL_ENV}) at round {round_}")
