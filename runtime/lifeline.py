"""A rank never outlives the process that started it (the ``lbsim`` launcher or the ``torchrun`` agent).

Killing the launcher (even with SIGKILL, which no handler sees) would leave its ranks running to
the end of their run. Each rank calls :func:`die_with_parent` first thing:

* on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the rank the moment its parent
  exits; a parent that died before the call is caught by comparing ``getppid()`` with the pid the
  parent gave (or the first one seen);
* elsewhere, a daemon thread polls ``getppid()`` every ``POLL_S`` and exits the rank when it changes.

The burner of ``--contention real`` already stops when its rank exits (:mod:`lbsim.runtime.burner`).
"""

from __future__ import annotations

import ctypes
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
