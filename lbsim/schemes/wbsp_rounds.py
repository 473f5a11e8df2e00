"""WBSP's rounds at the server — the bookkeeping both engines share (the scheme decides when).

Every applied upload's local steps join the *open* round. When the scheme says an upload closes
it (:meth:`lbsim.schemes.wbsp.WBSP.on_upload`), the round becomes one global update::

    update    = rounds closed before it (0, 1, ...)
    samples   = Σ batch over the round's steps          gradients = number of steps
    weight_j  = batch_j / samples                       staleness_j = update − base version of step j

and every worker is flagged to pull the round's snapshot; a worker learns it in the reply to its
next upload, once (:meth:`Rounds.take_flag`). Steps in the round still open when the run ends are
in no update (:meth:`Rounds.drop_open`). The engines keep their own step objects (``S``): the
simulator's step records, the runtime's ``(worker, iteration, batch)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

S = TypeVar("S")


class Rounds(Generic[S]):
    """The open round's steps, the samples of every closed round, and the workers' pull flags."""

    def __init__(self, workers: int, batch_of: Callable[[S], int]) -> None:
        self.workers = workers
        self.batch_of = batch_of
        self.open: list[S] = []  # steps whose deltas are applied in the open round
        self.samples_of: list[int] = []  # samples of each closed round
        self.samples_applied = 0  # their sum (the run's samples so far)
        self.flagged = [False] * workers  # the reply to the worker's next upload tells it to pull

    @property
    def closed(self) -> int:
        """Rounds closed (= the open round's index = the newest snapshot's version)."""
        return len(self.samples_of)

    def join(self, steps: Iterable[S]) -> None:
        """An applied upload's steps join the open round."""
        self.open.extend(steps)

    def close(self) -> tuple[int, int, list[S]]:
        """Close the open round: ``(update, samples, its steps)``; every worker is flagged to pull."""
        steps, self.open = self.open, []
        samples = sum(map(self.batch_of, steps))
        update = len(self.samples_of)
        self.samples_of.append(samples)
        self.samples_applied += samples
        self.flagged = [True] * self.workers
        return update, samples, steps

    def take_flag(self, worker: int) -> bool:
        """Is ``worker`` flagged to pull? The flag is answered once (in the reply to one upload)."""
        if self.flagged[worker]:
            self.flagged[worker] = False
            return True
        return False

    def weight(self, update: int, batch: int) -> float:
        """A step's share of its update: ``batch / samples``."""
        return batch / self.samples_of[update]

    def drop_open(self) -> int:
        """Forget the open round's steps (the run ended before it closed); returns how many."""
        n, self.open = len(self.open), []
        return n
