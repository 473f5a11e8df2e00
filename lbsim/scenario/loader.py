"""Loading a scenario: YAML file -> overrides -> typed Scenario -> cross-checks.

:func:`load_scenario` is the one entry point both engines and the CLI use. Every problem is an
:class:`~lbsim.errors.InputError` naming the key path; nothing is written while loading.
:func:`dump_scenario` writes the resolved scenario (defaults filled in, trace paths absolute) so
that loading it again gives the same scenario.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from lbsim.contention.config import TraceContention
from lbsim.errors import InputError
from lbsim.fields import parse, to_data
from lbsim.limits import MAX_YAML_BYTES, MAX_YAML_NODES, exceeds_values
from lbsim.samples.config import FileLengths
from lbsim.scenario.overrides import apply_overrides, parse_yaml, yaml_error_text
from lbsim.scenario.resolve import check_scenario
from lbsim.scenario.schema import Scenario


def check_yaml_size(path: str | Path) -> None:
    """A YAML input file larger than ``MAX_YAML_BYTES`` is refused before it is read."""
    try:
        size = Path(path).stat().st_size
    except OSError:
        return  # reading it reports the problem
    if size > MAX_YAML_BYTES:
        raise InputError(str(path), f"the file is {size} bytes, more than the bound of {MAX_YAML_BYTES} for a YAML input "
                                    "(its parser reads ~1 MB/s, comments included: keep long notes in another file)")


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A scenario file's YAML as a mapping, its size and structure bounded; InputError naming the file."""
    p = Path(path)
    if p.is_dir():
        raise InputError(str(path), "is a folder, not a scenario file (give a .yaml file)")
    if not p.is_file():
        raise InputError(str(path), "scenario file not found")
    check_yaml_size(p)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise InputError(str(path), f"not a UTF-8 text file (byte {err.start}: {err.reason})") from None
    except OSError as err:
        raise InputError(str(path), f"cannot read the scenario file: {err.strerror or err}") from None
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as err:
        raise InputError(str(path), yaml_error_text(err)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(str(path), f"the top level must be a mapping of sections, got {type(data).__name__}")
    return data


# Scenarios that passed scenario_from_data (by value: an equal scenario object is as valid).
_CHECKED: weakref.WeakSet[Scenario] = weakref.WeakSet()


def scenario_from_data(data: dict[str, Any], *, base_dir: Path | None = None) -> Scenario:
    """Parse and cross-check plain data; relative trace paths are resolved against ``base_dir``."""
    scenario = parse(Scenario, data)
    if base_dir is not None:
        scenario = _absolute_traces(scenario, base_dir)
    check_scenario(scenario)
    _CHECKED.add(scenario)
    return scenario


def checked(scenario: Scenario) -> Scenario:
    """``scenario`` if it (or an equal one) passed :func:`scenario_from_data`; else the scenario
    validated as its data would be (a Scenario built by hand gets every check a file gets)."""
    if scenario in _CHECKED:
        return scenario
    return scenario_from_data(scenario_data(scenario))


def with_changes(data: dict[str, Any], overrides: Iterable[str] = (), *, scheme: str | None = None) -> dict[str, Any]:
    """``data`` with the scheme switched to ``scheme`` (if given), then the ``--set`` overrides applied.

    The scheme is switched *before* the overrides, so ``--scheme ssp --set scheme.staleness=1``
    sets the staleness of the SSP scheme that is run. The result is bounded like a file
    (:data:`~lbsim.limits.MAX_YAML_NODES` values).
    """
    overrides = list(overrides)
    if scheme is not None:
        data = with_scheme(data, scheme)
    data = apply_overrides(data, overrides)
    if overrides and exceeds_values(data):  # each --set value is bounded; many of them together too
        raise InputError("--set", f"the scenario with its overrides holds more than {MAX_YAML_NODES} values, the bound")
    return data


def load_scenario(
    path: str | Path,
    overrides: Iterable[str] = (),
    *,
    scheme: str | None = None,
) -> Scenario:
    """Load ``path``, switch to the ``--scheme`` name if given, apply ``--set`` overrides, validate
    (:func:`with_changes`); relative trace paths are relative to the file's folder."""
    data = with_changes(read_yaml(path), overrides, scheme=scheme)
    return scenario_from_data(data, base_dir=Path(path).resolve().parent)


def with_scheme(data: dict[str, Any], scheme: str) -> dict[str, Any]:
    """Data with the scheme replaced by ``scheme``; the file's parameters are kept if it is the same scheme."""
    current = data.get("scheme")
    current_name = current.get("name") if isinstance(current, dict) else current
    if current_name == scheme:
        return data
    return {**data, "scheme": {"name": scheme}}


def _absolute_traces(scenario: Scenario, base_dir: Path) -> Scenario:
    items = tuple(
        replace(c, path=str((base_dir / c.path).resolve())) if isinstance(c, TraceContention) else c
        for c in scenario.contention
    )
    cost = scenario.workload.sample_cost
    if cost is not None and isinstance(cost.lengths, FileLengths):  # a lengths file, like a trace
        lengths = replace(cost.lengths, path=str((base_dir / cost.lengths.path).resolve()))
        scenario = replace(scenario, workload=replace(scenario.workload, sample_cost=replace(cost, lengths=lengths)))
    return replace(scenario, contention=items)


_FIRST_KEYS = ("name", "description", "seed", "workload", "cluster", "data", "network", "contention", "scheme")


def scenario_data(scenario: Scenario) -> dict[str, Any]:
    """The resolved scenario as plain data, sections in a readable order.

    ``data: null`` (the default: data local and free) and ``calibration: null`` are left out, so scenarios without a data
    section resolve to the same text as before the section existed; so are the node-and-link keys
    while they hold their defaults (:data:`_LATER_DEFAULTS`).
    """
    data = to_data(scenario)
    for key in ("data", "calibration"):
        if data.get(key) is None:
            data.pop(key, None)
    _drop_defaults(data.get("workload"), _LATER_DEFAULTS["workload"])
    for group in data.get("cluster", {}).get("groups", []):
        _drop_defaults(group, _LATER_DEFAULTS["group"])
    if data.get("network", {}).get("name") == "ring_allreduce":
        _drop_defaults(data["network"], _LATER_DEFAULTS["ring_allreduce"])
    return {**{k: data[k] for k in _FIRST_KEYS if k in data}, **data}


# keys added after scenarios were first written out, left out of the resolved text at their default
_LATER_DEFAULTS: dict[str, dict[str, Any]] = {
    "workload": {"overlap": None, "sample_cost": None},
    "group": {"workers_per_node": 1, "nic_latency_s": None, "intra_bandwidth_gbps": None, "intra_latency_s": None,
              "shared_node_slowdown": None, "compute_curve": None, "nics_per_node": 1},
    "ring_allreduce": {"algorithm": "ring", "nccl": None, "ring_latency": "slowest_hop"},
}


def _drop_defaults(section: Any, defaults: dict[str, Any]) -> None:
    if isinstance(section, dict):
        for key, default in defaults.items():
            if key in section and section[key] == default:
                del section[key]


DUMP_STYLE: dict[str, Any] = {"sort_keys": False, "default_flow_style": None, "width": 100}
"""How a resolved scenario is written as YAML: keys in the schema's order, short lists inline."""


def dump_scenario(scenario: Scenario) -> str:
    """The resolved scenario as YAML text (:func:`scenario_data`)."""
    return yaml.safe_dump(scenario_data(scenario), **DUMP_STYLE)
