"""The sweep's progress bar: runs done of runs to do, elapsed time and ETA (rich, on stderr).

Shown only when stderr is a terminal, so logs and pipes stay clean.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any


class SweepProgress:
    """``with SweepProgress("stragglers") as bar: run_sweep(..., on_progress=bar.update)``."""

    def __init__(self, label: str, *, enabled: bool | None = None) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> SweepProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("runs"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=Console(stderr=True), transient=False,
            )
            self._bar.start()
        return self

    def update(self, done: int, total: int) -> None:
        """Show ``done`` of ``total`` runs."""
        if self._bar is None:
            return
        if self._task is None:
            self._task = self._bar.add_task(self.label, total=total)
        self._bar.update(self._task, completed=done, total=total)

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
