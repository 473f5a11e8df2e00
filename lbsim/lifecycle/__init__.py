"""The run lifecycle: the one path every front door takes from a scenario to written results.

    load -> scheme and overrides -> (network variant) -> check -> guards -> stage the folder
         -> engine -> write -> typed outcome

A front door (the CLI, the Python API, sweeps, what-if, advise) parses its own arguments and then
calls, in order:

1. **plan** (:mod:`lbsim.lifecycle.plan`): :func:`plan_run` or :func:`plan_compare` load the
   scenario (a path or a Scenario), switch the scheme, apply the overrides, derive each scheme's
   network in a cross-family compare (:mod:`lbsim.lifecycle.families`), and pass every check and
   guard (:mod:`lbsim.lifecycle.guards`: scheme names, equal work, bounds) before anything runs;
2. **execute** (:mod:`lbsim.lifecycle.execute`): :func:`run` / :func:`compare` check the output
   folder, stage it (:mod:`lbsim.run_folder`), run each scenario on an :class:`Engine` (default: the
   simulator, imported on use by :func:`default_engine`), write the files and return a
   :class:`RunOutcome` / :class:`CompareOutcome`; without an output folder they only simulate.

Example (a new front door, e.g. a what-if that compares a recorded job's scenario under schemes of
both families against plain DDP)::

    from lbsim import lifecycle

    plan = lifecycle.plan_compare(scenario, ["lbbsp", "asp", "ssp"], cross_family=True,
                                  overrides={"workload.time_budget_s": 300})
    outcome = lifecycle.compare(plan, Path("runs/whatif"), argv=["lbsim", "whatif", ...])
    for row in outcome.rows:   # compare.csv's rows
        print(row["scheme"], row["network"], row["speedup_vs_baseline"])

Nothing here imports an engine at module level (tests/test_import_boundary.py).
"""

from __future__ import annotations

from lbsim.engine import Engine, ProgressFn, RunResult
from lbsim.lifecycle.engines import default_engine
from lbsim.lifecycle.execute import (
    CompareOutcome,
    RunOutcome,
    compare,
    compare_rows,
    run,
    run_files,
    run_into,
    save_compare,
    save_run,
    simulate,
    write_header,
    write_results,
    write_run,
)
from lbsim.lifecycle.families import network_variant, scheme_network
from lbsim.lifecycle.guards import (
    check_equal_work,
    check_jobs,
    check_out,
    check_scheme_names,
    default_out,
    out_folder,
    scheme_list,
)
from lbsim.lifecycle.plan import ComparePlan, Overrides, RunSpec, Source, load, override_strings, plan_compare, plan_run

__all__ = [
    "CompareOutcome", "ComparePlan", "Engine", "Overrides", "ProgressFn", "RunOutcome", "RunResult", "RunSpec", "Source",
    "check_equal_work", "check_jobs", "check_out", "check_scheme_names", "compare", "compare_rows", "default_engine",
    "default_out", "load", "network_variant", "out_folder", "override_strings", "plan_compare", "plan_run", "run",
    "run_files", "run_into", "save_compare", "save_run", "scheme_list", "scheme_network", "simulate", "write_header",
    "write_results", "write_run",
]
