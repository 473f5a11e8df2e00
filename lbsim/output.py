"""Writing a run's results: the output contract (docs/references.md §9), every file atomic.

The commands write into a staging folder that replaces the run folder only when the run is
complete (:mod:`lbsim.run_folder`), so a run folder never mixes two runs.
``DIR/scenario.resolved.yaml`` is written first (so a failed run still says what it ran), then
the tables in the chosen format (:data:`lbsim.metrics.writers.FORMATS`: ``.csv`` or
``.parquet``): ``iterations``, ``updates`` and, for schemes that log their decisions,
``decisions`` (e.g. ElasticBSP's supersteps), in numerics mode ``numerics`` (held-out loss and
accuracy against update count and simulated time); then ``provenance.json`` (versions,
:mod:`lbsim.provenance`) and ``summary.json`` last: a summary's presence means the run's
results are complete. Tables are written column-wise from the records' numpy columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lbsim.metrics.records import IterationTable, RecordTable, UpdateTable
from lbsim.metrics.summary import compare_columns
from lbsim.metrics.writers import Format, atomic_write_text, csv_text, rows_to_columns, write_json, write_table
from lbsim.provenance import INVOCATION, PROVENANCE, invocation, provenance
from lbsim.scenario.loader import dump_scenario
from lbsim.scenario.schema import Scenario


def write_scenario(out: Path, scenario: Scenario) -> None:
    """Write ``scenario.resolved.yaml``: the scenario as it ran, every default filled in."""
    atomic_write_text(out / "scenario.resolved.yaml", dump_scenario(scenario))


def write_run_header(out: Path, scenario: Scenario, argv: Sequence[str]) -> None:
    """What a run folder says before its results: the scenario as run and ``invocation.json``."""
    write_scenario(out, scenario)
    write_json(out / INVOCATION, invocation(list(argv)))


def write_compare_table(out: Path, summaries: Sequence[dict[str, Any]]) -> None:
    """``out/compare.csv``: every scheme's summary (speedups added), a row each."""
    columns = compare_columns(summaries)
    atomic_write_text(out / "compare.csv", csv_text(columns, ([s.get(c) for c in columns] for s in summaries)))


def _columns(records: Sequence[Any], kind: type[RecordTable]) -> dict[str, Any]:
    table = records if isinstance(records, kind) else kind.from_records(records)
    return table.columns  # type: ignore[no-any-return]


def write_run(
    out: Path,
    iterations: Sequence[Any],
    updates: Sequence[Any],
    summary: dict[str, Any],
    decisions: Sequence[dict[str, Any]] = (),
    numerics: Sequence[dict[str, float]] = (),
    *,
    fmt: Format = "csv",
    on_file: Callable[[str], None] | None = None,
) -> None:
    """Write the run's tables as ``fmt``, ``provenance.json``, then ``summary.json``.

    ``on_file(name)`` is called before each file is written (a progress display's hook).
    """
    tables: list[tuple[str, Any]] = [("iterations", lambda: _columns(iterations, IterationTable)),
                                     ("updates", lambda: _columns(updates, UpdateTable))]
    for name, rows in (("decisions", decisions), ("numerics", numerics)):
        if len(rows):
            tables.append((name, lambda rows=rows: rows_to_columns(rows)))
    for name, columns in tables:
        if on_file is not None:
            on_file(f"{name}.{fmt}")
        write_table(out / f"{name}.{fmt}", columns(), fmt)
    write_json(out / PROVENANCE, provenance(summary.get("engine")))
    write_json(out / "summary.json", summary)
