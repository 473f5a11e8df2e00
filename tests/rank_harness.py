"""Starting gloo ranks in tests as lbsim's launcher does: forked from the fork server with torch preloaded.

:func:`start_ranks` is ``torch.multiprocessing.start_processes`` with the start method of
:mod:`lbsim.runtime.launch`; the session's fork server, shared with the launcher's ranks, preloads
torch (``tests/conftest.py``'s ``pytest_configure``), so the tests' own rank jobs do not each import
torch afresh.

A rank that hangs fails its test instead of holding the whole run: each rank arms
:func:`faulthandler.dump_traceback_later`, which after ``timeout_s`` writes every thread's Python
stack to a file of the rank's and ends the rank (exit 1), even when it is stuck inside a C call (a
collective, a process group's teardown); the failure raised here carries those stacks. The parent
also stops waiting ``GRACE_S`` later (a rank whose watchdog could not run) and kills the ranks.
Without it one stuck rank holds the suite until CI's own limit: gloo's default collective timeout is
30 min, and a teardown waits with none.
"""

from __future__ import annotations

import faulthandler
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RANK_TIMEOUT_S = 300.0  # a test's ranks: their jobs take seconds (tens on a busy 2-core machine)
GRACE_S = 30.0


def _guarded(rank: int, fn: Callable[..., None], timeout_s: float, stacks: str, *args: Any) -> None:
    with open(Path(stacks) / f"rank{rank}.txt", "w") as out:
        faulthandler.dump_traceback_later(timeout_s, exit=True, file=out)
        try:
            fn(rank, *args)
        finally:
            faulthandler.cancel_dump_traceback_later()


def start_ranks(fn: Callable[..., None], args: tuple[Any, ...], nprocs: int, timeout_s: float = RANK_TIMEOUT_S) -> None:
    """Run ``fn(rank, *args)`` in ``nprocs`` processes and wait; a rank's exception is raised here, and
    so is a hang (after ``timeout_s``, with the hung ranks' stacks)."""
    import torch.multiprocessing as mp

    from lbsim.runtime.launch import start_method

    with tempfile.TemporaryDirectory(prefix="lbsim-ranks-") as stacks:
        context = mp.start_processes(_guarded, args=(fn, timeout_s, stacks, *args), nprocs=nprocs,
                                     start_method=start_method(), join=False)
        deadline = time.monotonic() + timeout_s + GRACE_S
        try:
            while not context.join(timeout=max(0.0, deadline - time.monotonic())):
                if time.monotonic() >= deadline:
                    alive = [rank for rank, p in enumerate(context.processes) if p.is_alive()]
                    raise TimeoutError(f"ranks {alive} still running {timeout_s + GRACE_S:g} s after their start")
        except BaseException as err:
            for p in context.processes:
                p.kill()
            dumped = {f.name: f.read_text() for f in sorted(Path(stacks).iterdir()) if f.stat().st_size}
            if not dumped:
                raise
            told = "\n".join(f"--- {name}, hung after {timeout_s:g} s:\n{text}" for name, text in dumped.items())
            raise AssertionError(f"{err}\n{told}") from err
