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
    label: str
    network: str
    throughput_samples_per_s: float
    sim_time_s: float
    speedup: Estimate


@dataclass(frozen=True)
class WhatifOutcome:
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
        return self.replay_s / self.recording.job_s - 1.0

    @property
    def lost_share(self) -> float:
        """Share of the (replayed) job lost to stragglers: (replay - ideal) / replay."""
        return max(0.0, 1.0 - self.ideal_s / self.replay_s) if self.replay_s > 0 else 0.0

    def row(self, label: str) -> SchemeRow:
        return next(r for r in self.rows if r.label == label)

    @property
    def replay_ok(self) -> bool:
        return abs(self.replay_error) <= REPLAY_TOLERANCE
