"""An iteration's compute, as the parameter-server drivers time it (both simulator paths).

Worker ``w``'s iteration ``i`` on a batch of ``b`` samples, started at ``t``: nominal seconds
``t(b)`` (:meth:`lbsim.workers.WorkerSpec.iteration_s`: ``t0 + b / v`` or the tabulated
curve, or with ``workload.sample_cost`` the work of the samples the iteration draws) times the
iteration's multiplier (trace replay × natural jitter,
:meth:`lbsim.contention.model.WorkerContention.iteration_factor`), integrated under the worker's
time-varying slowdown (:meth:`~lbsim.contention.model.WorkerContention.compute_end`). The
asynchronous and WBSP drivers, event path and fast path alike, call :func:`iteration_end_s`, so a
change to what an iteration costs is made here once.
"""

from __future__ import annotations

from lbsim.contention.model import WorkerContention
from lbsim.workers import WorkerSpec


def iteration_end_s(contention: WorkerContention, spec: WorkerSpec, start_s: float, batch: int, iteration: int) -> float:
    """When iteration ``iteration``'s compute on ``batch`` samples, started at ``start_s``, ends."""
    return contention.compute_end(start_s, spec.iteration_s(batch, iteration) * contention.iteration_factor(iteration))
