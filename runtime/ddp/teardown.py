"""Ending a DDP job's process group without torch's teardown deadlock.

A DDP model's C++ ``Reducer`` holds a reference to its process group. If it holds the *last* one
(``destroy_process_group()`` was called with the model still alive, and the model goes later: at a
function's return, in the collector, at the interpreter's exit), the group's destructor runs where
the Reducer is freed, with the GIL held, and joins gloo's worker threads. A worker that has just
finished a collective is then freeing that work's thread-local state, which can hold a Python
object: it waits for the GIL, the main thread waits for the worker, and the rank hangs for good
(torch 2.13, gloo; the stacks are in docs/library.md, "Ending the job"). Freed by
``destroy_process_group()`` instead, the group goes through torch's Python binding, which releases
the GIL before the destructor runs.

So a script drops its DDP models (and whatever still refers to them) and calls :func:`end_group`:
the collector frees them while the group is still registered (a DDP module sits in reference
cycles, so ``del`` alone does not free it), then a barrier (no rank tears down while another still
communicates) and ``destroy_process_group()``.
"""

from __future__ import annotations

import gc
import warnings

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def live_ddp_models() -> int:
    """How many ``DistributedDataParallel`` modules this process still holds (after a collection)."""
    gc.collect()
    # the type's own check: isinstance() would read every object's __class__, which some of torch's
    # deprecated objects answer with a warning
    return sum(1 for obj in gc.get_objects() if issubclass(type(obj), DistributedDataParallel))


def end_group() -> None:
    """Free the DDP models no longer referred to, then barrier and ``destroy_process_group()``.

    Call it on every rank once the job's DDP models are dropped (``del model``; a
    :class:`lbsim.runtime.ddp.LoadBalancer` keeps no reference to the model). A model still alive
    here is named in a :class:`RuntimeWarning`: its Reducer would free the group later, where the
    teardown can deadlock (see the module docstring)."""
    alive = live_ddp_models()
    if alive:
        warnings.warn(f"{alive} DistributedDataParallel model(s) still alive at end_group(): drop them first "
                      "(del model) so that the process group is not freed by a model's Reducer later, where "
                      "gloo's teardown can deadlock", RuntimeWarning, stacklevel=2)
    dist.barrier()
    dist.destroy_process_group()
