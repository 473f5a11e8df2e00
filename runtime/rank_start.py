"""A rank's first steps: take the launcher's environment (a forked rank), then run the rank.

:func:`rank_entry` is what the launcher starts. It imports nothing of lbsim beyond this module
before the environment is in place, and receives the job pickled, so that unpickling its arguments
loads no lbsim module either (lbsim's scheme registry reads ``LBSIM_SCHEME_MODULES`` when first
imported); a scheme module named there that an earlier import missed (the fork server loads the
registry without them: :mod:`lbsim.runtime.server_preload`) is imported after.

A rank forked by the fork server (:mod:`lbsim.runtime.launch`) inherits the server's environment,
fixed when the server started, and its C library read ``MALLOC_*_`` variables only then. So the rank
replaces ``os.environ`` with the launcher's at launch time and applies each glibc malloc variable
present there with ``mallopt(param, value)`` (the call those variables stand for, e.g.
``MALLOC_MMAP_THRESHOLD_`` = ``mallopt(M_MMAP_THRESHOLD, value)``), so that the rank runs as one
started afresh with that environment would. Torch's thread counts are set by the rank itself
(``torch.set_num_threads``), as in a spawned rank.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import pickle
import sys
from typing import Any

# glibc <malloc.h>: the mallopt() parameter each environment variable sets at start-up
MALLOPT_PARAMS = {
    "MALLOC_TRIM_THRESHOLD_": -1,  # M_TRIM_THRESHOLD
    "MALLOC_TOP_PAD_": -2,  # M_TOP_PAD
    "MALLOC_MMAP_THRESHOLD_": -3,  # M_MMAP_THRESHOLD
    "MALLOC_MMAP_MAX_": -4,  # M_MMAP_MAX
    "MALLOC_ARENA_MAX": -8,  # M_ARENA_MAX
}


def allocator_settings(env: dict[str, str]) -> list[tuple[int, int]]:
    """``(mallopt parameter, value)`` for each malloc variable in ``env`` with an integer value."""
    out = []
    for name, param in MALLOPT_PARAMS.items():
        value = env.get(name, "").strip()
        if value.isdigit():
            out.append((param, int(value)))
    return out


def adopt_environment(env: dict[str, str]) -> list[tuple[int, int]]:
    """Make ``env`` this process's environment and apply its malloc settings; returns those applied."""
    os.environ.clear()
    os.environ.update(env)
    settings = allocator_settings(env)
    if settings and sys.platform.startswith("linux"):
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):  # not glibc
            return []
        return [(p, v) for p, v in settings if mallopt(p, v) == 1]
    return []


def rank_entry(rank: int, world: int, job: bytes, shared: Any, status: str, method: str, env: dict[str, str]) -> None:
    """Target of the launcher's processes: set up the environment, then :func:`lbsim.runtime.worker.spawn_entry`."""
    from .lifeline import die_with_launcher

    die_with_launcher(forked_by_server=method == "forkserver")  # a killed launcher takes its ranks along
    if method == "forkserver":
        adopt_environment(env)
        if "lbsim.schemes" in sys.modules:  # loaded before the environment was the launcher's
            for name in filter(None, (m.strip() for m in env.get("LBSIM_SCHEME_MODULES", "").split(","))):
                importlib.import_module(name)
    from .worker import spawn_entry

    spawn_entry(rank, world, pickle.loads(job), shared, status)
