"""What every runtime driver shares: a run's spec and result, and the contention a worker runs under.

The synchronous loop (:mod:`lbsim.runtime.loop`), the parameter-server driver
(:mod:`lbsim.runtime.ps`) and WBSP's (:mod:`lbsim.runtime.wbsp`) take a :class:`LoopSpec` and return a
:class:`LoopResult`. Each worker runs under the scenario's contention model
(:func:`lbsim.contention.model.build_contention`, the simulator's), applied by an
:class:`~lbsim.runtime.inject.Injection` (:func:`injection_for`); what a mode cannot reproduce is
reported (:func:`not_injected`). A parameter-server run has one server rank after the workers
(:func:`server_rank`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lbsim.contention.model import build_contention
from lbsim.metrics.run_end import RunEnd

from .config import RuntimeOptions, TrainingConfig
from .inject import Injection
from .records import RoundLog


@dataclass
class LoopSpec:
    """One run of a driver: the scenario and its workers, the training and runtime options, the scheme
    (built on rank 0), when the run ends, and whether the scenario's contention is applied."""

    scenario: Any
    workers: tuple[Any, ...]
    training: TrainingConfig
    options: RuntimeOptions
    scheme_factory: Callable[[], Any]  # called on rank 0 only
    run_end: RunEnd  # when the run ends (update/sample targets, time budget), the simulator's rule
    inject: bool  # apply the scenario's contention (False while profiling)
    out: Path | None  # rank 0 streams partial records here
    scenario_path: str = ""
    overrides: tuple[str, ...] = ()

    def is_last(self, k: int, t: float | None, samples: int = 0) -> bool:
        """Update k (``samples`` applied so far, its own included), applied at time t, is the run's last.

        Every loop asks :meth:`RunEnd.update_made` on an update's own time before applying it; the
        servers pass the time the apply ended (no later update can be made once it is past the
        budget), the sync loop passes ``None``: it decides at compute end, before the round's
        update, and tests the budget at the end of the round's all-reduce."""
        end = self.run_end
        return end.reached(k + 1, samples) or (t is not None and not end.update_made(t))

    def fraction(self, k: int, t: float, samples: int = 0) -> float:
        """The run's progress in [0, 1] after update k at time t (:meth:`RunEnd.fraction`)."""
        return self.run_end.fraction(k + 1, samples, t)


@dataclass
class LoopResult:
    """What a driver returns on each rank: the final weights, the time the run ended, whether every
    replica holds the same weights, the notes for the summary; rank 0 also the records and the scheme."""

    w: torch.Tensor
    log: RoundLog | None  # rank 0 only
    scheme: Any  # rank 0 only
    end_s: float
    replicas_identical: bool
    notes: list[str]
    decision_s: float = 0.0  # rank 0: mean time of the scheme's next_batches call per round


def injection_for(spec: LoopSpec, worker: int, cores: list[int] | None, cont: Any = None) -> Injection:
    """The contention ``worker`` runs under in a loop of ``spec`` (none while profiling); ``cont``: its
    :class:`~lbsim.contention.model.WorkerContention` if already built."""
    if cont is None:
        cont = build_contention(spec.scenario, spec.workers)[worker]
    return Injection(cont, mode=spec.options.contention if spec.inject else None, scenario=spec.scenario_path,
                     overrides=list(spec.overrides), worker=worker, cores=cores,
                     horizon_s=spec.run_end.budget_s or 24 * 3600.0)


def not_injected(conts: list[Any], mode: str, data: bool = False) -> list[str]:
    """What of the scenario's contention this mode does not reproduce (reported in the summary)."""
    notes = []
    for i, c in enumerate(conts):
        if c.network:
            notes.append(f"worker {i}: network contention slows only the emulated data fetch, not the all-reduce" if data
                         else f"worker {i}: network contention is not injected by the runtime")
        if mode == "real" and c.iterations:
            notes.append(f"worker {i}: per-iteration trace multipliers are not applied in real mode")
    return notes


def server_rank(spec: LoopSpec) -> int:
    """The parameter-server rank: the one after the workers'."""
    return len(spec.workers)


def not_injected_notes(spec: LoopSpec) -> list[str]:
    """What of the scenario's contention the runtime does not reproduce (reported in the summary)."""
    if not spec.inject:
        return []
    return not_injected(build_contention(spec.scenario, spec.workers), spec.options.contention)
