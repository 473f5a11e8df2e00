"""Start one process per worker on this machine, watch them, and name the rank that failed.

:func:`launch` starts the ranks with ``multiprocessing`` and a rendezvous file in a private
directory, and waits. Ranks are forked from a *fork server* that has imported torch and lbsim's
rank modules once (start method ``forkserver``, preloading :data:`PRELOAD`), so a rank does not pay
their import (seconds of CPU) each time; where ``forkserver`` is not offered, they start with ``spawn``. Either way a rank
starts from a process that ran no torch code (no thread pools, no CUDA), and sets its environment,
allocator and thread counts itself (:mod:`lbsim.runtime.rank_start`). Each rank reports its progress
(rounds done) in shared memory and, if it fails, writes a report (its exception, whether it came
from a collective, its round) to a private status directory. When anything goes wrong the launcher
waits a few seconds for the others' reports, stops the survivors and names the culprit:

1. the rank whose *own* code failed first (not a collective that broke because of a peer);
2. else a rank that died without a report (killed, segfault, ``os._exit``) — its exit code;
3. else a rank that never reported and was still running: it hung, and the other ranks'
   collectives timed out (``--timeout-s``);
4. a watchdog covers hangs outside collectives: no progress at all for ``2 x timeout + 30`` s.

The run's records up to the last complete round are kept (:func:`lbsim.runtime.records.salvage`), and
:class:`RuntimeFailure` carries the one-line diagnosis.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lbsim.metrics.writers import write_json

from .rank_start import rank_entry
from .records import salvage
from .worker import Job

GRACE_S = 3.0  # after the first failure, time for the other ranks' reports


class RuntimeFailure(RuntimeError):
    """A rank crashed or hung; ``rank`` is the culprit (None if it cannot be told)."""

    def __init__(self, message: str, rank: int | None) -> None:
        super().__init__(message)
        self.rank = rank


# What the fork server imports before it forks ranks: the third-party modules, then the lbsim modules
# every rank imports, loaded so that settings read at import stay the launcher's (server_preload).
PRELOAD = ("torch", "torch.distributed", "numpy", "yaml", "lbsim.runtime.server_preload")
START_METHODS = ("forkserver", "spawn")


def preload_fork_server() -> None:
    """Have this process's fork server import :data:`PRELOAD` (effective when the server starts: at its
    first use by a launch, a test's ranks or a sweep's process pool, whichever comes first)."""
    import multiprocessing

    multiprocessing.set_forkserver_preload(list(PRELOAD))


def start_method(requested: str | None = None) -> str:
    """``requested``, else ``forkserver`` where this platform offers it, else ``spawn``."""
    import multiprocessing

    offered = multiprocessing.get_all_start_methods()
    if requested is not None:
        if requested not in START_METHODS or requested not in offered:
            raise ValueError(f"start method {requested!r}: expected one of {[m for m in START_METHODS if m in offered]}")
        return requested
    return "forkserver" if "forkserver" in offered else "spawn"


def launch(job: Job, nproc: int, *, progress: Any = None, method: str | None = None) -> None:
    """Run ``job`` on ``nproc`` local ranks; raises :class:`RuntimeFailure` naming the failed rank.

    ``method``: how ranks start (:func:`start_method`; default ``forkserver`` where offered).
    """
    import multiprocessing as mp  # not torch's: the job holds no tensors, and the launcher need not import torch

    how = start_method(method)
    ctx: Any = mp.get_context(how)
    if how == "forkserver":
        preload_fork_server()
    shared = ctx.Array("d", nproc + 1, lock=False)
    status = Path(tempfile.mkdtemp(prefix="lbsim-runtime-"))
    procs: list[Any] = []
    try:
        with _rank_environment():
            env = dict(os.environ)  # a forked rank takes the launcher's environment of now, not the server's
            payload = pickle.dumps(job)  # unpickled by the rank after it has taken the environment
            procs += [ctx.Process(target=rank_entry, args=(r, nproc, payload, shared, str(status), how, env),
                                 name=f"lbsim-rank{r}") for r in range(nproc)]
            for p in procs:
                p.start()
        _watch(procs, shared, status, job, progress)
    except BaseException:
        _stop(procs)
        raise
    finally:
        shutil.rmtree(status, ignore_errors=True)


# glibc malloc: serve a step's large tensors from the heap instead of fresh mmap()s, and keep the
# heap instead of trimming it, so that a step does not page-fault its activations afresh each time
# (step times then depend on the batch, not on the allocation history). A user's setting wins.
RANK_ENV = {"MALLOC_MMAP_THRESHOLD_": str(256 * 2**20), "MALLOC_TRIM_THRESHOLD_": str(1024 * 2**20)}


@contextlib.contextmanager
def _rank_environment() -> Iterator[None]:
    added = [k for k in RANK_ENV if k not in os.environ]
    os.environ.update({k: RANK_ENV[k] for k in added})
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def _reports(status: Path) -> dict[int, dict[str, Any]]:
    out = {}
    for f in status.glob("rank*.json"):
        try:
            rep = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        out[int(rep["rank"])] = rep
    return out


def _stop(procs: list[Any]) -> list[int]:
    """Terminate the ranks still running (SIGTERM, then SIGKILL); returns their indices."""
    alive = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in alive:
        procs[r].terminate()
    deadline = time.monotonic() + 3
    for r in alive:
        procs[r].join(max(0.0, deadline - time.monotonic()))
        if procs[r].is_alive():
            procs[r].kill()
            procs[r].join()
    return alive


def _watch(procs: list[Any], shared: Any, status: Path, job: Job, progress: Any) -> None:
    n = len(procs)
    timeout = job.options.timeout_s
    last = list(shared[:n])
    last_change = time.monotonic()
    failed_at: float | None = None
    while True:
        time.sleep(0.05)
        now = time.monotonic()
        codes = [p.exitcode for p in procs]
        if all(c == 0 for c in codes):
            return
        if progress is not None:
            progress(float(shared[n]))
        cur = list(shared[:n])
        if cur != last:
            last, last_change = cur, now
        if failed_at is None and (any(c not in (None, 0) for c in codes) or any(status.glob("rank*.json"))):
            failed_at = now
        hung = failed_at is None and now - last_change > 2 * timeout + 30
        if hung or (failed_at is not None and (all(c is not None for c in codes) or now - failed_at > GRACE_S)):
            killed = _stop(procs)
            reports = _reports(status)
            codes = [p.exitcode for p in procs]
            rank, message = diagnose(reports, codes, killed, [int(v) for v in shared[:n]], timeout_s=timeout,
                                     watchdog=hung)
            _salvage_all(job, message, rank)
            raise RuntimeFailure(message, rank)


def _signal_name(code: int) -> str:
    if code < 0:
        try:
            return f" (signal {signal.Signals(-code).name})"
        except ValueError:
            return f" (signal {-code})"
    return ""


def diagnose(reports: dict[int, dict[str, Any]], codes: list[int | None], killed: list[int], rounds: list[int], *,
             timeout_s: float, watchdog: bool = False) -> tuple[int | None, str]:
    """``(culprit rank, one-line message)`` from what the ranks reported and how they ended (pure)."""
    own = sorted((rep["time"], r) for r, rep in reports.items() if rep.get("kind") == "error")
    if own:
        r = own[0][1]
        rep = reports[r]
        where = f" in round {rep['round']} of {rep['task']}" if rep.get("task") else " while starting"
        return r, f"rank {r} failed{where}: {rep['type']}: {rep['message']}"
    died = [r for r, c in enumerate(codes) if r not in reports and r not in killed and c not in (None, 0)]
    if died:
        r = min(died, key=lambda i: rounds[i])
        return r, (f"rank {r} died without a report in round {rounds[r]} (exit code {codes[r]}{_signal_name(codes[r] or 0)}); "
                   "the other ranks lost contact with it")
    silent = [r for r in killed if r not in reports]
    if silent:
        r = min(silent, key=lambda i: rounds[i])
        why = ("no rank made progress for " f"{2 * timeout_s + 30:g} s" if watchdog
               else f"the other ranks' collectives timed out after {timeout_s:g} s")
        return r, f"rank {r} hung in round {rounds[r]} ({why}; it was stopped)"
    if reports:
        r = min(reports, key=lambda i: reports[i]["time"])
        return None, f"all ranks lost contact; first report from rank {r}: {reports[r]['message']}"
    return None, "the ranks stopped without a report"


def _salvage_all(job: Job, message: str, rank: int | None) -> None:
    for task in job.tasks:
        out = Path(task.out)
        if task.kind == "train" and any(out.glob("*.partial.csv")):
            salvage(out, {"error": message, "rank": rank, "note": "records up to the last complete round"})
        elif task.kind == "train" and (out / "failure.json").exists():
            data = json.loads((out / "failure.json").read_text(encoding="utf-8"))
            data.update(error=message, rank=rank, rank_0_saw=data.get("error"))
            write_json(out / "failure.json", data)
