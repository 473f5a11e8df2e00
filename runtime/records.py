"""Rank 0's records: per-round observation tables in, the simulator's record types out.

Every round each rank contributes one observation row (its own clock, seconds since the common
start barrier); rank 0 receives the table through the all-gather and turns it into
:class:`~lbsim.metrics.records.IterationRecord` and :class:`~lbsim.metrics.records.UpdateRecord`.
A rank's round ``k`` runs ``start -> fetch end`` (the emulated read of its batch with a ``data:``
section, :mod:`lbsim.runtime.loft`; the row's ``fetch_s``, 0 without one), ``fetch end -> compute end``
(batch draw, forward/backward, emulated stretch: ``compute_s``), then ``compute end -> end`` (the
all-gather that is the barrier, rank 0's sizing decision, the gradient aggregation and the SGD
step; the row also carries the batch's ``local`` sample count); its end is the start of its
round ``k + 1``, so round ``k`` is written when round ``k + 1``'s table (or the closing all-gather)
arrives. With ``P_i`` rank i's time after its compute, the round's communication is that of the
last rank to arrive, ``comm = min_i P_i``, and ``wait_i = P_i - comm`` (so
``fetch + compute + comm + wait = end - start``, as in the simulator, with no clock shared between
ranks needed). The update is made at
``max_i(compute end) + comm``.

Records are streamed to ``*.partial.csv`` as they are made, so a run that fails keeps everything up
to its last complete round (:func:`salvage` renames them and adds ``failure.json``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from lbsim.metrics.records import ITERATION_COLUMNS, UPDATE_COLUMNS, IterationRecord, UpdateRecord
from lbsim.metrics.run_end import cut_row
from lbsim.metrics.writers import atomic_write_text, csv_text, write_json

# Fields of one rank's observation row (float64), in order.
FIELDS = ("round", "batch", "start_s", "compute_end_s", "cpu_available", "mem_available", "cpu_measured",
          "oracle_slowdown", "real_compute_s", "loss", "fetch_s", "local")
F = {name: i for i, name in enumerate(FIELDS)}
OBSERVATION_COLUMNS = ("worker", "iteration", "batch", "compute_s", "real_compute_s", "cpu_available",
                       "cpu_measured", "mem_available", "loss", "fetch_s", "local_samples", "remote_samples")
PARTIAL = {"iterations": ITERATION_COLUMNS, "updates": UPDATE_COLUMNS, "observations": OBSERVATION_COLUMNS}


def _rows_text(columns: tuple[str, ...], rows: list[tuple[Any, ...]], header: bool) -> str:
    text = csv_text(columns, rows)
    return text if header else text.split("\n", 1)[1]


class RoundLog:
    """Rank 0's record builder (and, with ``out``, the writer of the partial record files)."""

    def __init__(self, workers: int, out: Path | None) -> None:
        self.n = workers
        self.iterations: list[IterationRecord] = []
        self.updates: list[UpdateRecord] = []
        self.observations: list[tuple[Any, ...]] = []
        self._pending: np.ndarray | None = None
        self._stamps: dict[int, float] = {}
        self.out = out
        self._files: dict[str, Any] = {}
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            for name, cols in PARTIAL.items():
                fh = open(out / f"{name}.partial.csv", "w", encoding="utf-8", newline="")  # noqa: SIM115
                fh.write(_rows_text(cols, [], header=True))
                fh.flush()
                self._files[name] = fh

    def add(self, table: np.ndarray) -> None:
        """Round ``k``'s table (one row per rank); completes round ``k - 1``."""
        if self._pending is not None:
            self._complete(self._pending, table[:, F["start_s"]])
        self._pending = table.copy()

    def stamp(self, k: int, t: float) -> None:
        """Round k's update was made at t: the moment rank 0 tested it against the time budget (the end
        of the round's all-reduce). Without a stamp the update's time is the first next-round start."""
        self._stamps[k] = t

    def forget_last_round(self) -> None:
        """Forget the last round added: its update was not made (the time budget), so it is not recorded."""
        if self._pending is not None:
            self._stamps.pop(int(self._pending[0, F["round"]]), None)
        self._pending = None

    def cut_at(self, end_s: float) -> None:
        """The run ended at ``end_s`` (the budget): a row whose gradient is in an update but whose
        iteration had not ended is recorded up to ``end_s`` and marked ``cut`` (lbsim.metrics.run_end)."""
        for i, it in enumerate(self.iterations):
            if it.end_s > end_s:
                moved_s = min(it.comm_s, end_s - it.start_s - it.fetch_s - it.compute_s)
                self.iterations[i] = IterationRecord(*cut_row(
                    worker=it.worker, iteration=it.iteration, update=it.update, start_s=it.start_s, end_s=end_s,
                    compute_s=it.compute_s, comm_s=moved_s, fetch_s=it.fetch_s, batch=it.batch,
                    staleness=it.staleness, weight=it.weight))

    def finish(self, ends: np.ndarray) -> float:
        """Complete the last round with every rank's end time; returns the run's end (max over ranks)."""
        if self._pending is not None:
            self._complete(self._pending, ends)
            self._pending = None
        self.close()
        return float(np.max(ends))

    def _complete(self, t: np.ndarray, ends: np.ndarray) -> None:
        k = int(t[0, F["round"]])
        start, cend, batch = t[:, F["start_s"]], t[:, F["compute_end_s"]], t[:, F["batch"]].astype(int)
        fetch, local = t[:, F["fetch_s"]], t[:, F["local"]].astype(int)
        post = ends - cend
        comm = max(0.0, float(post.min()))
        total = int(batch.sum())
        its = [
            IterationRecord(
                worker=i, iteration=k, update=k, start_s=float(start[i]), compute_s=float(cend[i] - start[i] - fetch[i]),
                comm_s=comm, wait_s=max(0.0, float(post[i]) - comm), end_s=float(ends[i]), batch=int(batch[i]),
                staleness=0, dropped=False, weight=float(batch[i]) / total if total else 0.0, fetch_s=float(fetch[i]),
            )
            for i in range(self.n)
        ]
        upd = UpdateRecord(update=k, time_s=self._stamps.pop(k, float(cend.max()) + comm), samples=total, gradients=self.n)
        obs = [
            (i, k, int(batch[i]), float(cend[i] - start[i] - fetch[i]), float(t[i, F["real_compute_s"]]),
             float(t[i, F["cpu_available"]]), float(t[i, F["cpu_measured"]]), float(t[i, F["mem_available"]]),
             float(t[i, F["loss"]]) if math.isfinite(t[i, F["loss"]]) else "", float(fetch[i]), int(local[i]),
             int(batch[i] - local[i]))
            for i in range(self.n)
        ]
        self.iterations.extend(its)
        self.updates.append(upd)
        self.observations.extend(obs)
        if self._files:
            from dataclasses import astuple

            self._write("iterations", [astuple(r) for r in its])
            self._write("updates", [astuple(upd)])
            self._write("observations", obs)

    def _write(self, name: str, rows: list[tuple[Any, ...]]) -> None:
        fh = self._files[name]
        fh.write(_rows_text(PARTIAL[name], rows, header=False))
        fh.flush()

    def close(self) -> None:
        for fh in self._files.values():
            fh.close()
        self._files = {}

    def discard_partials(self) -> None:
        self.close()
        if self.out is not None:
            for name in PARTIAL:
                try:
                    os.unlink(self.out / f"{name}.partial.csv")
                except FileNotFoundError:
                    pass


def salvage(out: Path, failure: dict[str, Any]) -> None:
    """Keep a failed run's records: ``*.partial.csv`` become the record files; add ``failure.json``.

    Idempotent (rank 0 calls it when it catches the failure, the launcher again in case rank 0
    died). No ``summary.json`` is written: its presence means a run is complete.
    """
    out.mkdir(parents=True, exist_ok=True)
    for name, cols in PARTIAL.items():
        part, final = out / f"{name}.partial.csv", out / f"{name}.csv"
        if part.exists():
            os.replace(part, final)
        elif not final.exists():
            atomic_write_text(final, _rows_text(cols, [], header=True))
    if not (out / "failure.json").exists():
        write_json(out / "failure.json", failure)
