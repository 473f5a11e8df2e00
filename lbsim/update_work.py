"""What one model update holds under a scheme, and whether a stop by updates is a fair comparison.

With global batch X and n workers, one model update holds:

* synchronous schemes (``bsp``, ``static``, ``lbbsp``, ``loft``): the gradients of the round's
  contributors, X samples in all (with k backup workers: the first n − k of them, about
  X (n − k) / n);
* parameter-server schemes (``asp``, ``ssp``, ``dssp``, ``elastic_bsp``): one worker's push, X/n;
* local-step schemes (``wbsp``): a round, every local step its workers took (X or more).

Stopping every scheme at the same number of updates then gives BSP n times the samples of ASP:
a comparison of different work. :func:`unequal_update_work` names the difference, so ``lbsim
compare`` can refuse it and say to stop on equal samples (``workload.samples``) or equal time
(``workload.time_budget_s``) instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def update_work(scheme: Any, workers: int) -> str:
    """What one model update of ``scheme`` (a built scheme object) holds, in words."""
    driver = getattr(scheme, "driver", "sync")
    if driver == "async":
        return "one worker's push (global_batch / workers samples)"
    if driver == "wbsp":
        return "a round of local steps (global_batch samples or more)"
    required = getattr(scheme, "required_gradients", workers)
    if required < workers:
        return f"the first {required} of {workers} workers' gradients (part of global_batch)"
    return "every worker's gradient (global_batch samples)"


def unequal_update_work(schemes: Sequence[tuple[str, Any]], workers: int) -> str | None:
    """None if every scheme's update holds the same work; else a sentence naming the differences."""
    work = {name: update_work(scheme, workers) for name, scheme in schemes}
    if len(set(work.values())) <= 1:
        return None
    return "; ".join(f"{name}: {what}" for name, what in work.items())
