"""A progress bar that appears only for work that takes more than a couple of seconds.

Uses rich; prints to stderr so tables and JSON on stdout stay clean, and stays silent when
stderr is not a terminal (CI logs, pipes).
"""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class LazyProgress:
    """``with LazyProgress("bsp") as p: ... p.update(fraction)`` — shows after ``delay_s``."""

    def __init__(self, label: str, *, delay_s: float = 2.0, enabled: bool | None = None) -> None:
        self.label = label
        self.delay_s = delay_s
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._t0 = time.monotonic()
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> LazyProgress:
        self._t0 = time.monotonic()
        return self

    def update(self, fraction: float, description: str | None = None) -> None:
        """Set the bar to ``fraction`` (0..1) and, if given, its label (e.g. the file being written)."""
        if description is not None:
            self.label = description
        if not self.enabled:
            return
        if self._bar is None:
            if time.monotonic() - self._t0 < self.delay_s:
                return
            self._bar = Progress(
                TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(), TimeRemainingColumn(), transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=1.0)
        self._bar.update(self._task, completed=fraction, description=self.label)  # type: ignore[arg-type]

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
