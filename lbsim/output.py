"""Writing a run's results: the output contract of product.md, every file atomic.

The commands write into a staging folder that replaces the run folder only when the run is
complete (:mod:`lbsim.run_folder`), so a run folder never mixes two runs.
``DIR/scenario.resolved.yaml`` is written first (so a failed runtime run still says what it ran), then
``DIR/iterations.csv``, ``DIR/updates.csv`` and, for schemes that log their decisions,
``DIR/decisions.csv`` (e.g. ElasticBSP's supersteps), in numerics mode ``DIR/numerics.csv``
(held-out loss and accuracy against update count and simulated time), and ``DIR/summary.json`` last: a summary's
presence means the run's results are complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple
from pathlib import Path
from typing import Any

from lbsim.metrics.records import ITERATION_COLUMNS, UPDATE_COLUMNS, IterationRecord, UpdateRecord
from lbsim.metrics.writers import atomic_write_text, write_csv, write_json
from lbsim.scenario.loader import dump_scenario
from lbsim.scenario.schema import Scenario


def write_scenario(out: Path, scenario: Scenario) -> None:
    atomic_write_text(out / "scenario.resolved.yaml", dump_scenario(scenario))


def write_run(
    out: Path,
    iterations: Sequence[IterationRecord],
    updates: Sequence[UpdateRecord],
    summary: dict[str, Any],
    decisions: Sequence[dict[str, Any]] = (),
    numerics: Sequence[dict[str, float]] = (),
) -> None:
    write_csv(out / "iterations.csv", ITERATION_COLUMNS, (astuple(r) for r in iterations))
    write_csv(out / "updates.csv", UPDATE_COLUMNS, (astuple(u) for u in updates))
    for name, rows in (("decisions.csv", decisions), ("numerics.csv", numerics)):
        if rows:
            columns = list(rows[0])
            write_csv(out / name, columns, ([row.get(c) for c in columns] for row in rows))
    write_json(out / "summary.json", summary)
