"""Planning runs: load a scenario, apply the scheme and overrides, pick each scheme's network, guard.

A plan is what a front door hands to :mod:`lbsim.lifecycle.execute`: every scenario loaded and
checked, every guard passed, before anything runs or is written.

* :func:`load` — a scenario from a YAML path or a :class:`~lbsim.scenario.schema.Scenario` object,
  the scheme switched and ``--set``-style overrides applied, every check of the loader (bounds
  included) passed. A Scenario object gets the same checks as a file (:func:`~lbsim.scenario.loader.checked`).
* :func:`plan_run` — one run (:class:`RunSpec`).
* :func:`plan_compare` — the same scenario and seed under several schemes (:class:`ComparePlan`),
  equal work guarded, with one stated baseline; with ``cross_family`` each scheme runs on its family's
  network (:mod:`lbsim.lifecycle.families`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lbsim.errors import InputError
from lbsim.fields import parse
from lbsim.lifecycle.families import network_kind, network_variant, scheme_network, variant_keys
from lbsim.lifecycle.guards import check_equal_work, check_scheme_names, scheme_list
from lbsim.scenario.loader import checked, read_yaml, scenario_data, scenario_from_data, with_changes
from lbsim.scenario.schema import Scenario
from lbsim.schemes.registry import BASELINE_SCHEME

Source = str | os.PathLike[str] | Scenario
"""A scenario: a YAML path (str or pathlib.Path) or a loaded :class:`~lbsim.scenario.schema.Scenario`."""

Overrides = Iterable[str] | Mapping[str, Any] | None
"""``--set`` overrides: ``KEY=VALUE`` strings, or a mapping of dotted keys to values (``{"seed": 3}``)."""


@dataclass(frozen=True)
class RunSpec:
    """One run to make: ``label`` (the scheme's name: the run's folder and table row) and its
    loaded, checked ``scenario`` (the scheme, the overrides and, in a cross-family compare, the
    network variant applied)."""

    label: str
    scenario: Scenario

    @property
    def network(self) -> str:
        """The kind of network the run uses (``parameter_server`` or ``ring_allreduce``)."""
        return network_kind(self.scenario)


@dataclass(frozen=True)
class ComparePlan:
    """Several runs of one scenario and seed, one per scheme, in table order, and the baseline.

    ``baseline`` is the label of the run every ``speedup_vs_baseline`` is measured against (its row
    is among ``runs``); ``cross_family``: each scheme on its family's network.
    """

    runs: tuple[RunSpec, ...]
    baseline: str
    cross_family: bool = False

    @property
    def labels(self) -> tuple[str, ...]:
        """The runs' labels, in run order."""
        return tuple(r.label for r in self.runs)

    @property
    def baseline_run(self) -> RunSpec:
        """The run every speedup is measured against."""
        return next(r for r in self.runs if r.label == self.baseline)

    def describe_baseline(self) -> str:
        """The baseline in words: ``bsp`` or, in a cross-family compare, ``bsp over ring_allreduce``."""
        return f"{self.baseline} over {self.baseline_run.network}" if self.cross_family else self.baseline


def override_strings(overrides: Overrides, option: str = "overrides") -> list[str]:
    """Overrides as ``KEY=VALUE`` strings; a mapping's values are written as YAML/JSON (strings as they are)."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return [f"{key}={value if isinstance(value, str) else json.dumps(value)}" for key, value in overrides.items()]
    items = list(overrides) if isinstance(overrides, Iterable) and not isinstance(overrides, (str, bytes)) else None
    if items is None or not all(isinstance(o, str) for o in items):
        raise TypeError(f"{option}: expected a mapping of dotted keys to values, e.g. {{'workload.updates': 50}}, "
                        f"or KEY=VALUE strings, got {type(overrides).__name__}")
    return items


def _data(source: Source, overrides: Sequence[str], scheme: str | None) -> tuple[dict[str, Any], Path | None]:
    """The scenario's plain data with the scheme switched and the overrides applied, and the folder its
    relative trace paths are relative to (None for a loaded scenario: its paths are absolute)."""
    if isinstance(source, Scenario):
        return with_changes(scenario_data(source), overrides, scheme=scheme), None
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"scenario: expected a YAML path (str or pathlib.Path) or a loaded Scenario, got {type(source).__name__}")
    path = source if isinstance(source, str) else Path(source)
    return with_changes(read_yaml(path), overrides, scheme=scheme), Path(source).resolve().parent


def load(source: Source, *, scheme: str | None = None, overrides: Overrides = None, network: str | None = None,
         network_keys: Mapping[str, Sequence[str]] | None = None, network_option: str = "network_variant") -> Scenario:
    """The scenario ``source`` with ``scheme`` (default: its own) and ``overrides``, loaded and checked.

    ``network`` (``parameter_server`` / ``ring_allreduce``) runs it on that kind of network: its own
    section if it has that kind, else the variant :func:`~lbsim.lifecycle.families.network_variant`
    derives, with ``network_keys[kind]`` (``network.KEY=VALUE`` strings) applied after the rules
    (an error in them names ``network_option KIND.KEY``).
    """
    sets = override_strings(overrides)
    if isinstance(source, Scenario) and scheme is None and not sets and network is None:
        try:
            return checked(source)
        except TypeError:  # an unhashable field in a Scenario built by hand: check its data instead
            return scenario_from_data(scenario_data(source))
    data, base_dir = _data(source, sets, scheme)
    if network is not None:
        parsed = parse(Scenario, data)
        if network_kind(parsed) != network:
            data = scenario_data(network_variant(parsed, network))
            if keys := (network_keys or {}).get(network, ()):
                try:  # the derived scenario parses; any error now is in the user's keys
                    data = with_changes(data, keys)
                    parse(Scenario, data)
                except InputError as err:
                    key = err.path.removeprefix("--set ").removeprefix("network").lstrip(".")
                    raise InputError(f"{network_option} {network}.{key}".rstrip("."), err.message) from None
    return scenario_from_data(data, base_dir=base_dir)


def plan_run(source: Source, *, scheme: str | None = None, overrides: Overrides = None,
             option: str = "scheme") -> RunSpec:
    """One run of ``source`` under ``scheme`` (default: the scenario's own), loaded and checked;
    ``option`` names the scheme argument in errors (``--scheme`` on the command line)."""
    if scheme is not None:
        if not isinstance(scheme, str):
            raise TypeError(f"{option}: expected a scheme name (str), got {type(scheme).__name__}")
        check_scheme_names(option, [scheme])
    scenario = load(source, scheme=scheme, overrides=overrides)
    return RunSpec(scenario.scheme.kind, scenario)


def plan_compare(source: Source, schemes: str | Sequence[str], *, overrides: Overrides = None,
                 baseline: str | None = None, cross_family: bool = False,
                 network_variant: Overrides = None, option: str = "schemes",
                 baseline_option: str = "baseline", variant_option: str = "network_variant") -> ComparePlan:
    """The same scenario and seed under each of ``schemes`` (``"bsp,asp"`` or ``["bsp", "asp"]``).

    ``baseline``: the scheme every ``speedup_vs_baseline`` is measured against — by default the
    first scheme listed, or, with ``cross_family``, ``bsp`` over the all-reduce (plain DDP); a
    baseline not listed is run too, first. ``cross_family``: each scheme on its family's network
    (parameter-server schemes on a parameter server, the others on an all-reduce), the kind the
    scenario lacks derived by :func:`~lbsim.lifecycle.families.network_variant`, its keys
    overridden by ``network_variant`` (``{"parameter_server.shards": 8}`` or ``KIND.KEY=VALUE``
    strings). Every scenario is loaded and checked, and the work of an update compared
    (:func:`~lbsim.lifecycle.guards.check_equal_work`), before anything runs. The ``*_option``
    arguments name the arguments in errors as the caller's user knows them.
    """
    names = scheme_list(schemes, option)
    if baseline is None:
        baseline = BASELINE_SCHEME if cross_family else names[0]
    elif not isinstance(baseline, str):
        raise TypeError(f"{baseline_option}: expected a scheme name (str), got {type(baseline).__name__}")
    check_scheme_names(baseline_option, [baseline])
    if baseline not in names:
        names = (baseline, *names)
    keys = override_strings(network_variant, variant_option)
    if keys and not cross_family:
        raise InputError(variant_option, "network variants apply to a cross-family compare only (--cross-family, "
                                         "cross_family=True); change the scenario's own network with network.KEY=VALUE")
    by_kind = variant_keys(keys, variant_option)
    sets = override_strings(overrides)
    if keys:
        own = _own_network(source, sets)
        if by_kind[own]:
            raise InputError(variant_option, f"the scenario's own network is {own}: change it with network.KEY=VALUE "
                                             f"overrides; {own}.KEY keys are for a derived {own} network")
    runs = []
    for name in names:  # every scheme is loaded and checked before anything runs
        try:
            network = _family_network(source, sets, name) if cross_family else None
            scenario = load(source, scheme=name, overrides=sets, network=network, network_keys=by_kind,
                            network_option=variant_option)
        except InputError as err:
            if err.path.startswith(variant_option):
                raise
            try:  # an error that does not depend on the scheme is reported as it is
                load(source, overrides=sets)
            except InputError as plain:
                if str(plain) == str(err):
                    raise err from None
            raise InputError(err.path, f"{err.message} (with scheme {name} from {option})") from None
        runs.append(RunSpec(name, scenario))
    check_equal_work([(r.label, r.scenario) for r in runs])
    return ComparePlan(tuple(runs), baseline, cross_family)


def _family_network(source: Source, sets: Sequence[str], scheme: str) -> str:
    """The network kind ``scheme`` (with the overrides: e.g. backup workers) runs on in a cross-family compare."""
    data, _ = _data(source, sets, scheme)
    return scheme_network(parse(Scenario, data).scheme)


def _own_network(source: Source, sets: Sequence[str]) -> str:
    data, _ = _data(source, sets, None)
    return network_kind(parse(Scenario, data))


__all__ = ["ComparePlan", "Overrides", "RunSpec", "Source", "load", "override_strings", "plan_compare",
           "plan_run"]
