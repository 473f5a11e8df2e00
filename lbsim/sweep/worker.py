"""What one sweep task does on a worker (a pool process or a Dask worker): run, return the files.

The task gets the run's resolved scenario YAML (its identity) and returns the run folder's
files as bytes (``scenario.resolved.yaml``, ``iterations``, ``updates``, ``provenance.json``, ``summary.json``,
and ``decisions`` / ``numerics`` when the run has them; tables as ``.csv`` or ``.parquet``), written by :mod:`lbsim.output` into a private temporary folder. The driver writes them into
``DIR/runs/<hash>/`` atomically, so workers need no shared file system and only one process
ever writes the sweep's output folder.

The engine is passed in (``engine(scenario) -> result`` with ``iterations``, ``updates``,
``summary`` and ``decisions``, e.g. :func:`lbsim.simulator.run.simulate`): the core never imports an
engine (design.md's dependency rule); the CLI chooses one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lbsim.metrics.writers import Format
from lbsim.output import write_run, write_scenario
from lbsim.scenario.loader import scenario_from_data
from lbsim.scenario.overrides import parse_yaml
from lbsim.scenario.schema import Scenario

Engine = Callable[[Scenario], Any]


def execute_run(engine: Engine, resolved_yaml: str, fmt: Format = "csv") -> dict[str, bytes]:
    """Run the scenario ``resolved_yaml`` with ``engine``; the run folder's files (tables as ``fmt``), name -> bytes."""
    scenario = scenario_from_data(parse_yaml(resolved_yaml))
    result = engine(scenario)
    with tempfile.TemporaryDirectory(prefix="lbsim-run-") as tmp:
        out = Path(tmp)
        write_scenario(out, scenario)
        write_run(out, result.iterations, result.updates, result.summary, getattr(result, "decisions", ()),
                  getattr(result, "numerics", ()), fmt=fmt)
        return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file() and not p.name.startswith(".")}
