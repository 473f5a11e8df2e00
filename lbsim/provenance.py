"""Which lbsim made a result: versions (stable) and the invocation (volatile), kept apart.

Every run folder holds ``provenance.json``: lbsim's version, the Python version and the versions
of the libraries that shape results (numpy, simpy, polars, pandas, torch for the runtime). It is
byte-identical across reruns with the same versions, so "same scenario + seed => byte-identical
files" still holds for every file of a run folder but one: ``invocation.json`` (the command
line, the UTC time, the host), which differs on every run and is left out of that comparison
(docs/api.md, "Provenance"). A sweep's ``sweep.json`` lists every lbsim version that wrote into
it; a sweep resumed under another version says so on stderr.

Pure apart from reading version strings (package metadata); never imports an engine.
"""

from __future__ import annotations

import functools
import os
import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from lbsim.version import __version__

PROVENANCE = "provenance.json"
INVOCATION = "invocation.json"
LIBRARIES = ("numpy", "simpy", "polars", "pandas", "pyyaml", "torch")


@functools.cache  # reading package metadata costs ~0.3 ms a library; a process's versions do not change
def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def provenance(engine: str | None = None) -> dict[str, Any]:
    """The stable record: lbsim, Python and library versions (``None`` for one not installed).

    torch is listed for the runtime engine only: what else the process happened to import (a
    test suite, a notebook) never changes the record.
    """
    libs = {name: _version(name) for name in LIBRARIES if name != "torch" or engine == "runtime"}
    out: dict[str, Any] = {"lbsim_version": __version__}
    if engine is not None:
        out["engine"] = engine
    out["python_version"] = platform.python_version()
    out["libraries"] = libs
    return out


def invocation(argv: list[str] | None = None) -> dict[str, Any]:
    """The volatile record: command line (``argv``, default ``sys.argv``), working directory, UTC time, host."""
    args = list(sys.argv if argv is None else argv)
    return {
        "command": args,
        "cwd": os.getcwd(),
        "time_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": platform.node(),
    }
