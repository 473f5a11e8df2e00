"""The outcome of a what-if: the recording, its fit and attribution, the replays and each scheme's speedup."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lbsim.recording import Recording
from lbsim.stats.intervals import Estimate
from lbsim.whatif.attribution import Attribution
from lbsim.whatif.fit import JobFit

REPLAY_TOLERANCE = 0.05  # the replay under the job's own scheme must reproduce its recorded time this well


@dataclass(frozen=True)
class SchemeRow:
    """One scheme's replay: its network family, throughput, simulated job time and speedup over the baseline
    (with its bootstrap interval)."""

    label: str
    network: str
    throughput_samples_per_s: float
    sim_time_s: float
    speedup: Estimate


@dataclass(frozen=True)
class WhatifOutcome:
    """Everything a what-if found: the recording, its fit and loss attribution, the replay under the job's own
    scheme and without stragglers, each scheme's row, where the files went, and notes for the reader."""

    recording: Recording
    fit: JobFit
    attribution: Attribution
    replay_s: float
    ideal_s: float
    baseline: str
    rows: tuple[SchemeRow, ...]
    out: Path
    notes: tuple[str, ...] = field(default=())

    @property
    def replay_error(self) -> float:
        """``replay / recorded − 1`` of the job time under its own scheme."""
        return self.replay_s / self.recording.job_s - 1.0

    @property
    def lost_share(self) -> float:
        """Share of the (replayed) job lost to stragglers: (replay - ideal) / replay."""
        return max(0.0, 1.0 - self.ideal_s / self.replay_s) if self.replay_s > 0 else 0.0

    def row(self, label: str) -> SchemeRow:
        """The row of the scheme ``label``."""
        return next(r for r in self.rows if r.label == label)

    @property
    def replay_ok(self) -> bool:
        """Whether the replay reproduces the recorded time within :data:`REPLAY_TOLERANCE`."""
        return abs(self.replay_error) <= REPLAY_TOLERANCE
