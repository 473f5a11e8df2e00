"""The floors of the code base: every import, at any depth, points to the same floor or one below.

The core reads top-down. From the ground up:

0. **ground** — typed field loading, errors, limits, random streams, the version, the worker model
   (``WorkerSpec``, worker selectors): what every model and config is written in;
1. **models** — pure formulas and decisions: network, contention (its config and its integration), samples,
   sizing, schemes, per-sample cost, numerics, metrics, data fetch, aggregation rules, the unit of work, statistics;
2. **scenario** — the scenario's sections, catalog, loading and resolving (which builds the models),
   and the engine contract (``engine.py``: a checked Scenario in, a ``RunResult`` out);
3. **records** — what a run leaves and how it is shown: output files, provenance, the run folder,
   reading results back, tables, progress, plots, warnings, the argument declarations ranks share;
4. **engines** — the simulator and the runtime (the top-level ``simulator/`` and ``runtime/``,
   imported as ``lbsim.simulator`` and ``lbsim.runtime``);
5. **lifecycle** — plan and execute, the guards, the default engine;
6. **front doors** — the CLI, the Python API (``lbsim`` itself re-exports it), sweeps, advise,
   calibration.

An import from floor *i* to floor *j > i* runs back up and fails :func:`test_no_import_runs_up`
(module level, inside functions and under ``TYPE_CHECKING`` alike: the edges of
``tests/test_import_circles.py``). Each top-level folder sits on one floor, and the graph of folders
(a top-level module counts as a folder of its own) has no loops either, not even within a floor.
A new module gets a floor by its folder; a new top-level module or folder must be placed below.
"""

from __future__ import annotations

from test_import_circles import _circles, _edges, _module_files

FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("ground", ("errors", "fields", "limits", "rng", "version", "workers")),
    ("models", ("aggregation", "contention", "fetch", "metrics", "network", "numerics", "samples", "schemes", "sizing",
                "stats", "update_work")),
    ("scenario", ("engine", "scenario")),
    ("records", ("arguments", "file_kinds", "notices", "output", "plots", "progress", "provenance", "results",
                 "recording", "run_folder", "shell", "tables")),
    ("engines", ("runtime", "simulator")),
    ("lifecycle", ("lifecycle",)),
    ("front doors", ("", "__main__", "advise", "api", "calibration", "cli", "sweep", "whatif")),
]
FLOOR_OF = {unit: i for i, (_, units) in enumerate(FLOORS) for unit in units}


def _unit(module: str) -> str:
    """The top-level folder or module of ``lbsim`` a module belongs to (``""``: the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _label(module: str) -> str:
    unit = _unit(module)
    return f"{module} ({FLOORS[FLOOR_OF[unit]][0]})" if unit in FLOOR_OF else module


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return [f"{_label(a)} imports {_label(b)}" for a in sorted(graph) for b in sorted(graph[a])
            if FLOOR_OF[_unit(b)] > FLOOR_OF[_unit(a)]]


def _folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    folders: dict[str, set[str]] = {_unit(m): set() for m in graph}
    for a, targets in graph.items():
        folders[_unit(a)].update(_unit(b) for b in targets if _unit(b) != _unit(a))
    return folders


def test_every_module_has_a_floor() -> None:
    files = _module_files()
    assert "lbsim.simulator.run" in files and "lbsim.runtime.worker" in files and "lbsim.fields" in files
    assert sorted({_unit(m) for m in files} - set(FLOOR_OF)) == []
    assert sorted(set(FLOOR_OF) - {_unit(m) for m in files}) == []  # no stale entry


def test_no_import_runs_up() -> None:
    assert _upward(_edges(_module_files())) == []


def test_no_loops_between_folders() -> None:
    assert _circles(_folder_graph(_edges(_module_files()))) == []


def test_the_checks_catch_an_upward_import_and_a_folder_loop() -> None:
    """A model importing the scenario runs up; two models importing each other make a loop."""
    graph = {
        "lbsim.schemes.bsp": {"lbsim.scenario.fields", "lbsim.errors"},
        "lbsim.scenario.fields": set(),
        "lbsim.errors": set(),
        "lbsim.network.topology": {"lbsim.contention.model"},
        "lbsim.contention.model": {"lbsim.network.overlap"},
        "lbsim.network.overlap": set(),
    }
    assert _upward(graph) == ["lbsim.schemes.bsp (models) imports lbsim.scenario.fields (scenario)"]
    assert _circles(_folder_graph(graph)) == [["contention", "network"]]
