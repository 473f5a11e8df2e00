"""The text a planned run travels as, to a local worker process or a Dask worker.

A run of an advice is its resolved scenario as YAML (:func:`lbsim.scenario.loader.scenario_data`),
written by :func:`run_text` and read back by :func:`read_run_text` on the worker. Both use libyaml
(PyYAML's ``CSafeDumper`` / ``CSafeLoader``) where it is installed, the pure-Python classes
otherwise. The text is this program's own output, never a user's file, so the checks that guard a
user's scenario (:func:`lbsim.scenario.overrides.parse_yaml`: duplicate keys, nesting and alias
bounds) are not repeated; the resolvers are the same as there (YAML 1.2 floats such as ``1e12``),
so ``read_run_text(run_text(s))`` equals ``parse_yaml(dump_scenario(s))``: the same data.
"""

from __future__ import annotations

from typing import Any

import yaml

from lbsim.scenario.loader import DUMP_STYLE, scenario_data
from lbsim.scenario.overrides import YAML12_FLOAT, YAML12_FLOAT_FIRST
from lbsim.scenario.schema import Scenario

_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader (libyaml's where available) with the scenario files' resolvers."""


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_FLOAT, YAML12_FLOAT_FIRST)


def run_text(scenario: Scenario) -> str:
    """``scenario`` as YAML, formatted as :func:`lbsim.scenario.loader.dump_scenario` formats it."""
    return str(yaml.dump(scenario_data(scenario), Dumper=_Dumper, **DUMP_STYLE))


def read_run_text(text: str) -> Any:
    """The data of a :func:`run_text`."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
