"""Starting gloo ranks in tests as lbsim's launcher does: forked from the fork server with torch preloaded.

:func:`start_ranks` is ``torch.multiprocessing.start_processes`` with the start method and the
fork server's preloaded modules of :mod:`lbsim.runtime.launch`, so the tests' own rank jobs do not
each import torch afresh (the server, one per test session, is shared with the launcher's ranks).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


def start_ranks(fn: Callable[..., None], args: tuple[Any, ...], nprocs: int) -> None:
    """Run ``fn(rank, *args)`` in ``nprocs`` processes and wait; a rank's exception is raised here."""
    import torch.multiprocessing as mp

    from lbsim.runtime.launch import PRELOAD, start_method

    how = start_method()
    if how == "forkserver":  # effective when the session's fork server starts (its first use)
        multiprocessing.set_forkserver_preload(list(PRELOAD))
    mp.start_processes(fn, args=args, nprocs=nprocs, start_method=how)
