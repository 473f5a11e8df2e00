"""LB-BSP as a library for ordinary PyTorch DDP scripts launched with ``torchrun`` (docs/library.md).

Public names (import from ``lbsim.runtime.ddp``)::

    lb = LoadBalancer(global_batch=96)          # every rank, after init_process_group
    lb.attach(ddp_model)                        # batch-weighted gradient hook: g = sum_r (b_r/B) g_r
    loader = DataLoader(ds, batch_sampler=lb.sampler(len(ds)))   # rank r's b_r samples per step
    ...
    lb.finish(); del model; end_group()         # the end: models dropped, then the group (teardown.py)

Modules: :mod:`~lbsim.runtime.ddp.balancer` (decisions by lbsim's ``lbbsp`` scheme and sizing code),
:mod:`~lbsim.runtime.ddp.decision` (the decision core ``lbsim train``'s synchronous loop shares),
:mod:`~lbsim.runtime.ddp.sampler` (an epoch cut into per-rank batches), :mod:`~lbsim.runtime.ddp.hook` (the
weighted communication hook), :mod:`~lbsim.runtime.ddp.timing` (per-rank compute time on CPU and CUDA),
:mod:`~lbsim.runtime.ddp.inject` (the runtime's emulated contention, per bucket),
:mod:`~lbsim.runtime.ddp.recorder` (a job's per-rank, per-step record for ``lbsim whatif``),
:mod:`~lbsim.runtime.ddp.teardown` (the process group's end without torch's teardown deadlock).
"""

from .balancer import LoadBalancer
from .decision import Decider, round_observation
from .hook import weighted_gradient, weighted_sum_hook
from .inject import SlowedRank, constant_slowdown, slowed_hook
from .recorder import Recorder
from .sampler import BalancedBatchSampler
from .teardown import end_group, live_ddp_models
from .timing import StepClock

__all__ = [
    "BalancedBatchSampler", "Decider", "LoadBalancer", "Recorder", "SlowedRank", "StepClock", "constant_slowdown",
    "end_group", "live_ddp_models", "round_observation", "slowed_hook", "weighted_gradient", "weighted_sum_hook",
]
