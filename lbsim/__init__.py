"""lbsim — which synchronization scheme, how much faster, on my cluster?

The shared core of lbsim: the scenario schema and catalog, contention profiles, batch sizing,
scheme decisions and metrics. It imports neither simpy nor torch; the two engines
(``lbsim.simulator`` and ``lbsim.runtime``, the top-level folders ``simulator/`` and ``runtime/``)
import it and carry out its decisions.

The Python API (docs/api.md) is loaded on first use, so ``import lbsim`` stays light:
``lbsim.simulate(path_or_scenario, scheme=..., overrides={...})``, ``lbsim.compare(...)`` and
``lbsim.load(folder)`` (:mod:`lbsim.api`).
"""

from __future__ import annotations

from typing import Any

from lbsim.version import __version__

__all__ = ["__version__", "compare", "load", "simulate"]


def __dir__() -> list[str]:  # the API, loaded on first use, is listed (tab completion, dir(lbsim))
    return sorted({*__all__, *(k for k in globals() if k.startswith("__"))})


def __getattr__(name: str) -> Any:
    if name in ("simulate", "compare", "load"):
        from lbsim import api

        return getattr(api, name)
    raise AttributeError(f"module 'lbsim' has no attribute {name!r}")
