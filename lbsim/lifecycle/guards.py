"""The lifecycle's guards: every check a front door needs before it runs anything, written once.

Each guard raises :class:`~lbsim.errors.InputError` (the CLI prints one line and exits 2; the
Python API lets it propagate) before an engine starts or a file is written. ``option`` names the
argument as the caller's user knows it (``--schemes`` on the command line, ``schemes`` in Python);
the rest of the message is the same through every door.

* :func:`scheme_list` / :func:`check_scheme_names` — scheme names: a comma-separated string or a
  sequence, none twice, each registered (a close match is suggested). A name inside a scenario
  (``scheme: {name: ...}``, a sweep's ``scheme`` factor) is checked by the scenario parser with the
  same message.
* :func:`check_equal_work` — a comparison never stops by model updates across schemes whose update
  holds different work (:mod:`lbsim.update_work`): that compares different work.
* :func:`out_folder` / :func:`check_out` — the output folder: the default ``runs/<input>/<leaf>``
  and the check that the path (or its nearest existing parent) is a directory. Replacing an existing
  run folder is :mod:`lbsim.run_folder`'s rule (staging, the lock).
* :func:`check_jobs` — a sweep's ``-j`` within :data:`lbsim.limits.MAX_JOBS`.

The scenario's own bounds (:mod:`lbsim.limits`: file size, values, workers, planned
worker-iterations, ...) are checked where every door loads it (:func:`lbsim.lifecycle.plan.load`).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lbsim.errors import InputError
from lbsim.limits import MAX_JOBS
from lbsim.scenario.resolve import build_scheme_for, resolve_workers
from lbsim.scenario.schema import Scenario
from lbsim.schemes.registry import scheme_names
from lbsim.update_work import unequal_update_work


def check_scheme_names(option: str, names: Sequence[str]) -> None:
    """Every name is a registered scheme, or an InputError listing the valid ones."""
    valid = scheme_names()
    for name in names:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(option, f"unknown scheme {name!r}{hint}; valid: {', '.join(valid)}")


def scheme_list(schemes: Any, option: str = "schemes") -> tuple[str, ...]:
    """``schemes`` (``"bsp,asp"`` or ``["bsp", "asp"]``) as distinct registered names, in order.

    A value that is neither a string nor a sequence of strings is a TypeError naming ``option`` (a
    caller's bug); an empty list, a name given twice or an unknown name is an InputError.
    """
    if isinstance(schemes, str):
        names = [s.strip() for s in schemes.split(",") if s.strip()]
    elif isinstance(schemes, Sequence) and all(isinstance(s, str) for s in schemes):
        names = [s.strip() for s in schemes]
    else:
        raise TypeError(f"{option}: expected scheme names as a comma-separated string or a sequence of strings, "
                        f"got {type(schemes).__name__}")
    if not names or not all(names):
        raise InputError(option, "give a comma-separated list of scheme names (see `lbsim schemes`)")
    if len(set(names)) != len(names):
        raise InputError(option, f"a scheme is listed twice: {','.join(names)}")
    check_scheme_names(option, names)
    return tuple(names)


def check_equal_work(runs: Sequence[tuple[str, Scenario]]) -> None:
    """Refuse a stop by model updates across schemes whose update holds different work.

    ``runs`` are (label, scenario) pairs of one comparison; the work of an update is read off each
    built scheme, on the first scenario's workers (a comparison runs every scheme on the same cluster).
    """
    if not runs:
        return
    updates = runs[0][1].workload.updates
    if updates is None:
        return
    workers = resolve_workers(runs[0][1])
    why = unequal_update_work([(label, build_scheme_for(sc, workers)) for label, sc in runs], len(workers))
    if why is not None:
        raise InputError("workload.updates", (
            f"stopping every scheme at {updates} model updates compares different work ({why}); compare on equal "
            "samples or equal time: workload.updates=null with workload.samples=N or workload.time_budget_s=T "
            "(--set KEY=VALUE on the command line, overrides={...} in Python)"))


def check_out(out: Path, option: str = "--out") -> Path:
    """``out`` may become an output folder: it, or its nearest existing parent, is a directory."""
    for p in (out, *out.parents):
        if p.exists():
            if not p.is_dir():
                raise InputError(option, f"{p} exists and is not a directory; give a directory path")
            break
    return out


def default_out(source: str | os.PathLike[str], leaf: str | None = None) -> Path:
    """Where a command writes unless told: ``runs/<input file's name without suffixes>[/<leaf>]``."""
    folder = Path("runs") / Path(source).name.split(".")[0]
    return folder / leaf if leaf else folder


def out_folder(out: str | os.PathLike[str] | None, default: Path, option: str = "--out") -> Path:
    """The output folder of a command: ``out`` if given, else ``default`` (usually :func:`default_out`);
    checked (:func:`check_out`)."""
    return check_out(Path(out) if out else default, option)


def check_jobs(jobs: int | None, scheduler: str | None = None) -> None:
    """A sweep's local process count: 1..MAX_JOBS, and none with a Dask scheduler (its workers run it)."""
    if jobs is not None and not 1 <= jobs <= MAX_JOBS:
        raise InputError("-j", f"expected a number of worker processes >= 1 and <= {MAX_JOBS}, got {jobs}")
    if jobs is not None and scheduler:
        raise InputError("-j", "with --scheduler the Dask cluster's workers run the sweep; drop -j")
