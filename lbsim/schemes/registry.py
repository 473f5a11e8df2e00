"""The scheme registry: one decorator per scheme, one place to look names up.

A scheme module declares its parameters as a frozen dataclass and registers its class::

    @register_scheme("ssp", SSPConfig)
    class SSP: ...

The scenario loader parses ``scheme: {name: ssp, staleness: 3}`` into ``SSPConfig`` through
:func:`scheme_configs`; the engines build the decision object with :func:`build_scheme`. An
unknown name fails with the list of valid names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from lbsim.errors import InputError
from lbsim.schemes.base import is_synchronous

_SCHEMES: dict[str, tuple[type, type]] = {}

BASELINE_SCHEME = "bsp"
"""The reference scheme: a scenario's default, the base of every speedup, what profiling runs."""
C = TypeVar("C", bound=type)


def register_scheme(name: str, config: type) -> Callable[[C], C]:
    """Class decorator: register a scheme under ``name`` with its parameter dataclass."""

    def deco(cls: C) -> C:
        if name in _SCHEMES:
            raise ValueError(f"scheme {name!r} registered twice")
        config.kind = name  # type: ignore[attr-defined]
        cls.name = name  # type: ignore[attr-defined]
        _SCHEMES[name] = (cls, config)
        return cls

    return deco


def unregister_scheme(name: str) -> None:
    """Forget scheme ``name`` (a test's toy scheme, registered for one test)."""
    cfg = _SCHEMES.pop(name)[1]
    if getattr(cfg, "kind", None) == name:
        del cfg.kind  # type: ignore[attr-defined]


def _load_all() -> None:
    import lbsim.schemes  # noqa: F401  (its __init__ imports every scheme module)


def scheme_configs() -> Mapping[str, type]:
    """``{name: config dataclass}`` for every registered scheme."""
    _load_all()
    return {name: cfg for name, (_cls, cfg) in _SCHEMES.items()}


def scheme_names() -> list[str]:
    """Every registered scheme's name, sorted."""
    _load_all()
    return sorted(_SCHEMES)


def scheme_class(name: str) -> type:
    """The scheme class registered as ``name``; InputError listing the valid names."""
    _load_all()
    if name not in _SCHEMES:
        raise InputError("scheme.name", f"unknown {name!r}; valid: {', '.join(sorted(_SCHEMES))}")
    return _SCHEMES[name][0]


def needs_sample_cost(name: str) -> bool:
    """Does scheme ``name`` only differ from BSP when samples differ in cost (``workload.sample_cost``)?

    A scheme declares it with ``needs_sample_cost: ClassVar[bool] = True`` (length bucketing: without
    lengths its buckets are BSP's equal split).
    """
    return bool(getattr(scheme_class(name), "needs_sample_cost", False))


def not_applicable(name: str, *, sample_cost: bool) -> str | None:
    """Why scheme ``name`` would only repeat BSP on a scenario with (or without) a sample-cost model;
    ``None`` where it applies. The front doors that run every scheme (advise, whatif) leave such a
    scheme out of their defaults."""
    if needs_sample_cost(name) and not sample_cost:
        return f"{name} differs from BSP only when samples differ in cost; the scenario has no workload.sample_cost"
    return None


def needs_parameter_server(config: Any) -> bool:
    """Does the scheme configured by ``config`` need a parameter server (its *family*)?

    Schemes without a global barrier (driver ``async`` or ``wbsp``: ASP, SSP, DSSP, ElasticBSP,
    WBSP) push to and pull from a server; so does a synchronous scheme with backup workers (the
    server drops the late gradients). Every other synchronous scheme (BSP, static, LB-BSP, LOFT)
    runs on an all-reduce (or on a parameter server, where the scenario has one).
    """
    return not is_synchronous(scheme_class(config.kind)) or getattr(config, "backup_workers", 0) > 0


def scheme_summary(name: str) -> str:
    """The first line of the scheme class's docstring."""
    doc = (scheme_class(name).__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


def build_scheme(config: Any, ctx: Any) -> Any:
    """Instantiate the scheme named by ``config.kind`` for a run described by ``ctx``."""
    return scheme_class(config.kind)(config, ctx)
