"""A rank never outlives the process that started it (the ``lbsim`` launcher or the ``torchrun`` agent).

Killing the launcher (even with SIGKILL, which no handler sees) would leave its ranks running to
the end of their run. Each rank calls :func:`die_with_parent` first thing:

* on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the rank the moment its parent
  exits; a parent that died before the call is caught by comparing ``getppid()`` with the pid the
  parent gave (or the first one seen);
* elsewhere, a daemon thread polls ``getppid()`` every ``POLL_S`` and exits the rank when it changes.

A rank forked by the launcher's *fork server* (:func:`die_with_launcher`) has the server as its
parent, and the server outlives the launcher while any rank runs (every rank holds the server's
"clients alive" pipe). Such a rank watches the launcher itself: the launcher holds the write end of a
pipe whose read end the rank has (``multiprocessing.parent_process().sentinel``); the kernel closes
it when the launcher exits, however it ends, and a daemon thread blocked on it ends the rank. The
death signal is armed on the server as well.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
POLL_S = 0.5
ORPHAN_EXIT_CODE = 70


def _pdeathsig() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:  # pragma: no cover - runs until the process ends
    while os.getppid() == parent:
        time.sleep(POLL_S)
    os._exit(ORPHAN_EXIT_CODE)


def die_with_parent(parent: int | None = None) -> None:
    """End this process when ``parent`` (default: the current parent) exits."""
    parent = os.getppid() if parent is None else parent
    armed = _pdeathsig()
    if os.getppid() != parent:  # the parent is already gone (it died before the death signal was armed)
        os._exit(ORPHAN_EXIT_CODE)
    if not armed:
        threading.Thread(target=_watch, args=(parent,), name="lbsim-lifeline", daemon=True).start()


def die_with_launcher(forked_by_server: bool) -> None:
    """End this rank when the process that launched it (``multiprocessing.parent_process()``) exits."""
    launcher = multiprocessing.parent_process()
    if not forked_by_server:
        die_with_parent(launcher.pid if launcher is not None else None)
        return
    die_with_parent()  # the fork server
    if launcher is not None:
        threading.Thread(target=_watch_sentinel, args=(launcher.sentinel,), name="lbsim-lifeline", daemon=True).start()


def _watch_sentinel(sentinel: int) -> None:  # pragma: no cover - runs until the process ends
    from multiprocessing.connection import wait

    wait([sentinel])  # ready (end of file) once the launcher has exited
    os._exit(ORPHAN_EXIT_CODE)
