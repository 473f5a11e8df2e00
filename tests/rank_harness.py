"""Starting gloo ranks in tests as lbsim's launcher does: forked from the fork server with torch preloaded.

:func:`start_ranks` is ``torch.multiprocessing.start_processes`` with the start method of
:mod:`lbsim.runtime.launch`; the session's fork server, shared with the launcher's ranks, preloads
torch (``tests/conftest.py``'s ``pytest_configure``), so the tests' own rank jobs do not each import
torch afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def start_ranks(fn: Callable[..., None], args: tuple[Any, ...], nprocs: int) -> None:
    """Run ``fn(rank, *args)`` in ``nprocs`` processes and wait; a rank's exception is raised here."""
    import torch.multiprocessing as mp

    from lbsim.runtime.launch import start_method

    mp.start_processes(fn, args=args, nprocs=nprocs, start_method=start_method())
