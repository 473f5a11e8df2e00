"""Recording a DDP job, per rank and step, in lbsim's recording format (:mod:`lbsim.recording`).

Per step, each rank notes four moments on its clock (seconds since the ranks' common start, the
barrier in the constructor) and its batch:

    batch_ready_s    the rank holds its batch          (:meth:`Recorder.begin`; balancing: the balancer's step start)
    last_bucket_s    its last gradient bucket is ready  (the DDP communication hook's last mark)
    step_end_s       backward has returned: every bucket all-reduced   (:meth:`Recorder.synced`)
    optimizer_end_s  the optimizer step has returned    (:meth:`Recorder.end`)

The last-bucket moment is what the balancer measures (:mod:`lbsim.runtime.ddp.timing`): the rank's
own work, not the wait for the others. Two modes:

* **observe** (a plain DDP script, equal batches, nothing balanced): the recorder owns a
  :class:`~lbsim.runtime.ddp.timing.StepClock`; :meth:`Recorder.wrap` wraps the script's comm hook
  (DDP's ``allreduce_hook`` by default) so each bucket marks the clock first (:meth:`Recorder.attach`).
* **balancing** (``Recorder(..., balancer=lb)``): the balancer's own clock and hook are read; nothing
  is timed twice.

Off the critical path: a step appends one tuple to a list. Every ``flush_every`` steps (and at
:meth:`Recorder.close`) the pending rows are resolved and appended to the rank's shard as whole lines
with one write; on CUDA the moments are events, read then (one synchronisation per flush, long
after the steps' work). ``job.json`` says ``complete: false`` until every rank has closed its shard,
so a killed job is read up to its last complete step.
"""

from __future__ import annotations

import socket
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from lbsim.recording.writer import csv_header, csv_line, header, shard_name, write_header
from lbsim.version import __version__

from .inject import SlowedRank, slowed_hook
from .timing import StepClock

DEFAULT_FLUSH_EVERY = 32


def device_name(device: torch.device) -> str:
    """``cpu`` or ``cuda:<GPU name>``: ranks on the same kind of device share a compute curve in the fit."""
    return f"cuda:{torch.cuda.get_device_name(device)}" if device.type == "cuda" else "cpu"


class Recorder:
    """Writes this rank's shard of a job recording into ``folder`` (create on every rank after
    ``init_process_group``; it makes one barrier, the clocks' common start).

    ``balancer``: a :class:`~lbsim.runtime.ddp.balancer.LoadBalancer` whose clock and decisions are
    recorded (balancing mode); None: observe mode (attach the recorder's hook with :meth:`attach`).
    ``gradient_bytes``: bytes all-reduced per step (default: the attached model's parameters).
    """

    def __init__(self, folder: str | Path, *, balancer: Any = None, global_batch: int | None = None,
                 gradient_bytes: int | None = None, flush_every: int = DEFAULT_FLUSH_EVERY, group: Any = None,
                 device: torch.device | None = None) -> None:
        if flush_every < 1:
            raise ValueError(f"flush_every must be >= 1, got {flush_every}")
        if not dist.is_initialized():
            raise RuntimeError("Recorder needs torch.distributed to be initialised (init_process_group) first")
        self.folder = Path(folder)
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self.balancer = balancer
        self.device = balancer.device if balancer is not None else (device or torch.device("cpu"))
        self.clock: StepClock = balancer.clock if balancer is not None else StepClock(self.device)
        self.cuda = self.device.type == "cuda"
        self.host = socket.gethostname()
        self.device_label = device_name(self.device)
        self.flush_every = int(flush_every)
        self.gradient_bytes = gradient_bytes
        self.global_batch = global_batch if global_batch is not None else getattr(balancer, "global_batch", None)
        if balancer is not None:
            options = {k: v for k, v in asdict(balancer.config).items() if v is not None}
            # the balancer's rhythm, as the simulated scheme models it (lbsim.schemes.lbbsp: decide_every, decision_lag)
            options.update(decide_every=balancer.decide_every, decision_lag=2 if balancer.lag == 2 else 0)
            self.scheme: dict[str, Any] = {"name": "lbbsp", **options}
        else:
            self.scheme = {"name": "bsp"}
        self.folder.mkdir(parents=True, exist_ok=True)
        self._pending: list[tuple[Any, ...]] = []
        self._step = 0
        self._samples = 0
        self._tokens: int | None = None
        self._has_tokens: bool | None = None
        self._synced: Any = None
        self._file: Any = None
        self._closed = False
        self.cost_s = 0.0  # wall time spent in the recorder's own calls (hook marks, steps, flushes): its overhead
        dist.barrier(group=group)  # the common start: every rank's clock counts from here
        self.origin_s = time.perf_counter()
        self._origin_ev: Any = self._event() if self.cuda else None
        if self.rank == 0:
            self._write_header(complete=False)

    # -- moments -------------------------------------------------------------------------------------------
    def _event(self) -> Any:
        ev = torch.cuda.Event(enable_timing=True)
        ev.record(torch.cuda.current_stream(self.device))
        return ev

    def _now(self) -> Any:
        return self._event() if self.cuda else time.perf_counter()

    def _seconds(self, moment: Any) -> float:
        if isinstance(moment, float):
            return moment - self.origin_s
        moment.synchronize()
        return float(self._origin_ev.elapsed_time(moment)) / 1000.0

    # -- wiring (observe mode) -----------------------------------------------------------------------------
    def wrap(self, inner: Any = None) -> Any:
        """A DDP comm hook that marks this rank's clock at each ready bucket, then runs ``inner``
        (default: DDP's own ``allreduce_hook``, the mean of the ranks' gradients)."""
        inner = inner if inner is not None else default_hooks.allreduce_hook
        clock = self.clock

        def hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks annotations: none given
            t = time.perf_counter()
            clock.mark()
            self.cost_s += time.perf_counter() - t
            return inner(state, bucket)

        return hook

    def attach(self, ddp_model: torch.nn.parallel.DistributedDataParallel, inner: Any = None, state: Any = None,
               slowed: SlowedRank | None = None) -> None:
        """Register :meth:`wrap` ``(inner)`` on ``ddp_model`` (observe mode; the balancer has its own hook);
        ``slowed``: an emulated slowdown paid at each bucket before the mark (:func:`~lbsim.runtime.ddp.inject.slowed_hook`)."""
        if self.balancer is not None:
            raise RuntimeError("in balancing mode the balancer's hook marks the clock: attach the balancer, not the recorder")
        if self.gradient_bytes is None:
            self.gradient_bytes = sum(p.numel() * p.element_size() for p in ddp_model.parameters() if p.requires_grad)
            if self.rank == 0:
                self._write_header(complete=False)
        ddp_model.register_comm_hook(state, slowed_hook(self.wrap(inner), slowed))

    # -- the step --------------------------------------------------------------------------------------------
    def begin(self, samples: int, tokens: int | None = None) -> None:
        """This rank holds its batch of ``samples`` (``tokens``: its tokens, where the script counts them)."""
        if self.balancer is None:
            self.clock.start()
        t = time.perf_counter()
        if self._has_tokens is None:
            self._has_tokens = tokens is not None
        elif self._has_tokens != (tokens is not None):
            raise ValueError("tokens: pass them at every step or at none (one shard has one set of columns)")
        self._samples, self._tokens = int(samples), tokens
        self.cost_s += time.perf_counter() - t

    def synced(self) -> None:
        """Backward has returned: every gradient bucket is all-reduced."""
        t = time.perf_counter()
        self._synced = self._now()
        self.cost_s += time.perf_counter() - t

    def end(self) -> None:
        """The optimizer step has returned: the step is complete (flushed every ``flush_every`` steps)."""
        t = time.perf_counter()
        opt_end = self._now()
        synced = self._synced if self._synced is not None else opt_end
        start = self.clock.start_event if self.cuda else self.clock.started_s
        self._pending.append((self._step, self._samples, self._tokens, start, self.clock.lap(), synced, opt_end))
        self._step += 1
        self._synced = None
        if len(self._pending) >= self.flush_every:
            self.flush()
        self.cost_s += time.perf_counter() - t

    # -- files -------------------------------------------------------------------------------------------------
    def _write_header(self, *, complete: bool) -> None:
        balancer = None
        if self.balancer is not None:
            balancer = {"decide_every": self.balancer.decide_every, "lag": self.balancer.lag}
        data = header(self.world, self.scheme, complete=complete, gradient_bytes=self.gradient_bytes,
                      global_batch=self.global_batch, flush_every=self.flush_every, created_by=f"lbsim {__version__}")
        data["balancer"] = balancer
        write_header(self.folder, data)

    def flush(self) -> None:
        """Append the pending steps to this rank's shard (one write)."""
        if not self._pending:
            return
        lines = []
        if self._file is None:
            self._file = open(self.folder / shard_name(self.rank), "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
            lines.append(csv_header(bool(self._has_tokens)))
        for step, samples, tokens, start, lap, synced, opt_end in self._pending:
            ready = self._seconds(start)
            bucket = ready + lap.seconds()
            times = [ready, bucket, max(bucket, self._seconds(synced)), max(bucket, self._seconds(opt_end))]
            times[3] = max(times[3], times[2])
            lines.append(csv_line(self.rank, self.host, self.device_label, step, samples, times, tokens))
        self._pending = []
        self._file.write("".join(lines))
        self._file.flush()

    def close(self) -> None:
        """Flush, close the shard and, once every rank has (a barrier), mark the job complete."""
        if self._closed:
            return
        self.flush()
        if self._file is not None:
            self._file.close()
        self._closed = True
        dist.barrier(group=self.group)
        if self.rank == 0:
            self._write_header(complete=True)
