"""WBSP — worker-busy synchronous parallel (Yang, Hu, Liu, Jin, Yeung, You; Parallel Computing 121
(2024) 103092; official code Dora233/WBSP).

Rule (schemes.md, schemes-research.md §5): fast workers never wait at a synchronization point.
Every worker keeps taking local SGD steps on its equal share X/n of the global batch and pushes
the delta of each step to the parameter server, which applies it on arrival. The global model
advances one *round* when the slowest worker uploads: the server snapshots the model at that
upload, and every worker pulls that same snapshot at its next step boundary (deltas arriving after
the snapshot belong to the next round — the "paper-consistent" reading of the code's race). A
round therefore averages n local models, where fast worker i took about T_slow / T_i local steps
and the slowest took one.

Which worker is "the slowest" (our choice; the official code hard-codes worker 1): the argmax of
an exponential moving average of each worker's measured step time (``slow_ema_alpha`` weights the
newest step), ties to the lowest index; a worker not yet measured counts with its nominal
compute time ``t0_i + x_i / v_i`` from the scenario, so before any measurement the designated
slowest is the worker of smallest nominal speed. The designation is re-evaluated each time a
round closes and changes only when another worker's EMA exceeds the current one's by more than
``switch_margin`` (0: pure argmax), so that equally slow workers do not hand the role back and
forth, each hand-over making a round of almost no steps.

Optimised variant (``overlap: true``, the paper's PCC, code ``wk_pcc_v2.py``): a compute loop
runs local steps back to back while a communication loop pushes what has finished and pulls when
the server flags it, so a round lasts about ``max(T_comp,slow, T_comm)`` instead of their sum.
The engine (:mod:`lbsim.simulator.wbsp`) documents the timing details.

This module is the pure decision logic: equal batches, the step-time EMAs, the designation, and
whether an applied upload closes the round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from lbsim.fields import param
from lbsim.schemes.base import SchemeContext, WorkerObservation
from lbsim.schemes.bsp import check_even_split
from lbsim.schemes.registry import register_scheme
from lbsim.sizing.split import even_split


@dataclass(frozen=True)
class WBSPConfig:
    overlap: bool = param(False, "PCC variant: communication overlaps computation (a compute and a communication loop per worker)")
    slow_ema_alpha: float = param(0.3, "weight of the newest step time in each worker's EMA (picks the slowest)", gt=0, le=1)
    switch_margin: float = param(0.05, "the designated slowest changes only to a worker whose EMA is this fraction larger (0: pure argmax)", ge=0)
    overlap_pull_blocks: bool = param(True, "overlap: a step boundary reached while a flagged pull is in flight waits for it "
                                            "(the official PCC code spins there); false: keep computing, adopt the pulled model later")


def argmax_lowest(values: Sequence[float]) -> int:
    """Index of the largest value, the lowest index on ties."""
    return max(range(len(values)), key=values.__getitem__, default=0)  # max keeps the first of equal maxima


@register_scheme("wbsp", WBSPConfig)
class WBSP:
    """Worker-busy synchronous: fast workers keep stepping; a round closes at the slowest's upload."""

    name: ClassVar[str]
    driver: ClassVar[str] = "wbsp"

    def __init__(self, config: WBSPConfig, ctx: SchemeContext) -> None:
        self.cfg = config
        self._alpha = config.slow_ema_alpha
        self.overlap = config.overlap
        self.overlap_pull_blocks = config.overlap_pull_blocks
        n = ctx.workers
        self._batches = even_split(ctx.global_batch, n)
        check_even_split(self._batches, ctx, self.name)
        self.nominal_s = tuple(t0 + b / v for t0, b, v in zip(ctx.t0_s, self._batches, ctx.samples_per_s, strict=True))
        self.ema: list[float | None] = [None] * n
        self._designated = argmax_lowest(self.nominal_s)
        self.initial_slowest = self._designated
        self.rounds = 0
        self.changes = 0
        self.closed_by = [0] * n
        self.rows: list[dict[str, Any]] = []

    # -- what the engine asks -------------------------------------------------------------------
    def batch(self, worker: int) -> int:
        """``worker``'s batch: the even share, always."""
        return self._batches[worker]

    def observe(self, obs: WorkerObservation) -> None:
        """A worker finished a local step: fold its step time (fetch + compute + comm + wait) into its EMA."""
        self.observe_step(obs.worker, obs.fetch_s + obs.compute_s + obs.comm_s + obs.wait_s)

    def observe_step(self, worker: int, step_s: float) -> None:
        """:meth:`observe` given the step time alone (what the rule reads; the engine's cheap call)."""
        ema = self.ema
        old = ema[worker]
        if old is None:
            ema[worker] = step_s
        else:
            a = self._alpha
            ema[worker] = a * step_s + (1 - a) * old

    def estimates(self) -> tuple[float, ...]:
        """Each worker's step-time estimate: its EMA, or its nominal compute time before any step."""
        return tuple([e if e is not None else nom for e, nom in zip(self.ema, self.nominal_s, strict=True)])

    def slowest(self) -> int:
        """The designated slowest worker: its next upload closes the round; any other worker's
        upload leaves everything as it is (:meth:`on_upload` returns False at once)."""
        return self._designated

    def on_upload(self, worker: int, steps: int, time_s: float) -> bool:
        """The server applied an upload of ``worker`` carrying ``steps`` new local steps at ``time_s``.

        Returns True when this upload closes the round: the uploader is the designated slowest
        (and the upload carries at least one step). The designation for the next round is then
        re-evaluated.
        """
        if steps <= 0 or worker != self._designated:
            return False
        self.closed_by[worker] += 1
        est = self.estimates()
        cand = argmax_lowest(est)
        keep = self.cfg.switch_margin > 0 and est[cand] <= est[self._designated] * (1 + self.cfg.switch_margin)
        nxt = self._designated if keep else cand
        self.rows.append({"round": self.rounds, "time_s": time_s, "closed_by": worker, "next_slowest": nxt,
                          "slowest_ema_s": est[worker], "next_slowest_ema_s": est[nxt]})
        if nxt != self._designated:
            self.changes += 1
        self._designated = nxt
        self.rounds += 1
        return True

    def diagnostics(self) -> dict[str, object]:
        """Overlap, rounds, and which worker was designated the slowest."""
        return {
            "wbsp_overlap": self.overlap,
            "wbsp_rounds": self.rounds,
            "wbsp_slowest_changes": self.changes,
            "wbsp_initial_slowest": self.initial_slowest,
            "wbsp_final_slowest": self._designated,
            "wbsp_rounds_closed_by": list(self.closed_by),
        }

    def decision_rows(self) -> list[dict[str, Any]]:
        """One row per closed round: who closed it and who is designated for the next one."""
        return [dict(r) for r in self.rows]
