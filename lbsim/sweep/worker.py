"""What one sweep task does on a worker (a pool process or a Dask worker): run, return the files.

The task gets the run's resolved scenario YAML (its identity) and returns the run folder's
files as bytes (``scenario.resolved.yaml``, ``iterations``, ``updates``, ``provenance.json``, ``summary.json``,
and ``decisions`` / ``numerics`` when the run has them; tables as ``.csv`` or ``.parquet``), written
by the run lifecycle (:func:`lbsim.lifecycle.execute.run_files`) into a private temporary folder. The
driver writes them into ``DIR/runs/<hash>/`` atomically, so workers need no shared file system and
only one process ever writes the sweep's output folder.

The engine is an :class:`lbsim.engine.Engine` (None: the lifecycle's default, the simulator), passed
by reference so it pickles to a pool process or a Dask worker.
"""

from __future__ import annotations

from lbsim.engine import Engine
from lbsim.lifecycle.execute import run_files
from lbsim.metrics.writers import Format

__all__ = ["Engine", "execute_run"]


def execute_run(engine: Engine | None, resolved_yaml: str, fmt: Format = "csv") -> dict[str, bytes]:
    """Run the scenario ``resolved_yaml`` with ``engine``; the run folder's files (tables as ``fmt``), name -> bytes."""
    return run_files(engine, resolved_yaml, fmt)
