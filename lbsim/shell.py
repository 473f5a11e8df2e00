"""How the command line meets the Unix shell: a closed pipe, a full disk, an unwritable place.

* A closed pipe (``lbsim run ... | head -0``, ``lbsim schemes | head -2``): the reader has all it
  wanted. lbsim stops writing, says nothing, and exits with 141 (128 + SIGPIPE, what a shell
  reports for a program killed by the signal), as ``cat`` and ``ls`` end. Results are written
  before anything is printed, so the run's folder is complete.
* A full disk, a quota, a file too large, a read-only file system, a failing device: one line
  naming the path that could not be written (``<stdout>`` for the standard output) and the
  system's reason, exit code 1. A run folder is swapped in only when complete, so the previous
  run stays as it was (:mod:`lbsim.run_folder`).
"""

from __future__ import annotations

import errno
import os
import sys

SIGPIPE_EXIT = 141
# the environment's fault, not lbsim's: said in one line naming the path, no traceback
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM})


def is_broken_pipe(err: BaseException) -> bool:
    """Whether ``err`` is a closed pipe (the reader went away, e.g. ``| head``)."""
    return isinstance(err, BrokenPipeError) or (isinstance(err, OSError) and err.errno == errno.EPIPE)


def quiet_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again on a closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def write_error_line(err: OSError) -> str | None:
    """The one line for an error writing a file (None: not such an error)."""
    if err.errno not in WRITE_ERRNOS:
        return None
    where = err.filename if err.filename is not None else "<stdout>"
    return f"cannot write {where}: {err.strerror or os.strerror(err.errno or 0)}"
