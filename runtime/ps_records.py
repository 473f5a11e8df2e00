"""The server's records of a parameter-server run, in the simulator's record types.

Every applied push is one :class:`~lbsim.metrics.records.UpdateRecord` (one gradient; for WBSP a
closed round is the update). A worker's iteration ``k`` runs from ``start_s`` (it received the
reply to its previous push) through its compute to ``end_s`` (it received the reply to this push,
with the weights it pulls); the worker reports ``end_s`` in its next push header, so the server
completes the record then. Splitting ``end_s - compute end`` (the worker's own clock):

* ``wait_s`` — the server's own time on the push, from receiving it to sending the reply: applying
  it and, when the scheme held the worker (SSP's bound, ElasticBSP's barrier), the hold;
* ``comm_s`` — the rest: the push's and the pull's transfers, and the time the push waited for the
  server to take it (the simulator counts that queueing as ``wait_s``: the runtime cannot see it).

``staleness`` = the update's index minus the version of the weights the worker computed on (the
updates applied when it pulled), exactly as the simulator counts it. As in the simulator, the
final update's pusher gets no pull (its iteration ends when the update is applied) and
iterations still computing when the run ends are not recorded. Unlike the simulator, a worker
the scheme holds when the run ends has its iteration recorded, ending at the final update:
its push is applied, so every update has the record of the iteration that made it.
"""

from __future__ import annotations

from dataclasses import astuple
from pathlib import Path
from typing import Any

from lbsim.metrics.records import IterationRecord, UpdateRecord

from .records import RoundLog


class PushLog(RoundLog):
    """Records of a parameter-server run, streamed to ``*.partial.csv`` as they complete."""

    def __init__(self, workers: int, out: Path | None) -> None:
        super().__init__(workers, out)
        self.pending: dict[int, dict[str, Any]] = {}  # worker -> its iteration waiting for end_s

    def update(self, update: int, time_s: float, samples: int, gradients: int) -> None:
        rec = UpdateRecord(update=update, time_s=time_s, samples=samples, gradients=gradients)
        self.updates.append(rec)
        if self._files:
            self._write("updates", [astuple(rec)])

    def begin(self, worker: int, header: dict[str, float], *, update: int, staleness: int, weight: float = 1.0) -> None:
        """The server applied ``worker``'s push of ``header`` (one iteration; end time still unknown)."""
        self.pending[worker] = {"header": header, "update": update, "staleness": staleness, "weight": weight}

    def served(self, worker: int, server_s: float) -> None:
        """The server replied to ``worker``'s pending push after ``server_s`` seconds of its own."""
        if worker in self.pending:
            self.pending[worker]["server_s"] = server_s

    def complete(self, worker: int, end_s: float, cut: bool = False) -> None:
        """``worker`` received the reply at ``end_s`` (its clock): its pending iteration is recorded
        (``cut``: the run's time budget ended it at ``end_s``, :mod:`lbsim.metrics.run_end`)."""
        p = self.pending.pop(worker, None)
        if p is None:
            return
        h = p["header"]
        start, cend = h["start_s"], h["compute_end_s"]
        post = max(0.0, end_s - cend)
        wait = min(post, max(0.0, p.get("server_s", 0.0)))
        self.record(IterationRecord(
            worker=worker, iteration=int(h["iteration"]), update=p["update"], start_s=start, compute_s=cend - start,
            comm_s=post - wait, wait_s=wait, end_s=end_s, batch=int(h["batch"]), staleness=p["staleness"],
            dropped=False, weight=p["weight"], cut=cut,
        ), h)

    def record(self, rec: IterationRecord, header: dict[str, float]) -> None:
        loss = header["loss"]
        obs = (rec.worker, rec.iteration, rec.batch, rec.compute_s, header["real_compute_s"], header["cpu_available"],
               header["cpu_measured"], header["mem_available"], loss if loss == loss else "", rec.fetch_s, rec.batch, 0)
        self.iterations.append(rec)
        self.observations.append(obs)
        if self._files:
            self._write("iterations", [astuple(rec)])
            self._write("observations", [obs])

    def drop_pending(self) -> int:
        """Forget iterations whose end never came (held or running when the run ended); returns how many."""
        n = len(self.pending)
        self.pending.clear()
        return n
