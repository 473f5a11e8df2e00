"""What the fork server imports of lbsim before it forks ranks (:data:`lbsim.runtime.launch.PRELOAD`).

Every rank imports :mod:`lbsim.runtime.worker` and what it imports (the scenario loader, the
schemes, the records: about a third of a CPU-second, more where Python writes no bytecode cache);
imported once in the server, a forked rank finds them loaded.

A setting read at import must be the launcher's at launch, not the server's at its start. The only
one is ``LBSIM_SCHEME_MODULES`` (:mod:`lbsim.schemes`): the built-in schemes are loaded here with it
unset, and a rank imports the modules that the launcher's environment names once it has taken
that environment (:func:`lbsim.runtime.rank_start.rank_entry`), as a rank that imported lbsim itself
would. An import that fails here is left to the ranks, which import the module again and report
the error.
"""

from __future__ import annotations

import importlib
import os

MODULES = ("lbsim.runtime.worker",)


def preload() -> None:
    """Import :data:`MODULES` with ``LBSIM_SCHEME_MODULES`` unset; an error is left to the ranks."""
    named = os.environ.pop("LBSIM_SCHEME_MODULES", None)
    try:
        for name in MODULES:
            importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a rank imports the module again and reports what failed
        pass
    finally:
        if named is not None:
            os.environ["LBSIM_SCHEME_MODULES"] = named


preload()
