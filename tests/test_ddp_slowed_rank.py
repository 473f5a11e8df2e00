"""The DDP rank's emulated slowdown counts its work in wall or CPU seconds (lbsim.runtime.ddp.inject.SlowedRank).

A fake clock stands in for ``time``: the rank computes (wall and CPU advance together), waits for a
core (wall advances, CPU does not), and sleeps (wall only), so the emulated ends are exact."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import lbsim.runtime.ddp.inject as ddp_inject  # noqa: E402
import lbsim.runtime.inject as inject  # noqa: E402
from lbsim.runtime.ddp import SlowedRank, constant_slowdown  # noqa: E402


class FakeTime:
    """``monotonic``, ``thread_time`` and ``sleep`` on a clock the test moves."""

    def __init__(self) -> None:
        self.wall = 100.0
        self.cpu = 5.0

    def monotonic(self) -> float:
        return self.wall

    def thread_time(self) -> float:
        return self.cpu

    def sleep(self, s: float) -> None:
        self.wall += s

    def compute(self, s: float) -> None:
        self.wall += s
        self.cpu += s

    def wait_for_core(self, s: float) -> None:
        self.wall += s


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(ddp_inject, "time", fake)
    monkeypatch.setattr(inject, "time", fake)
    return fake


@pytest.mark.parametrize(("work", "expected_s"), [("wall", 3.0 * (0.02 + 0.03 + 0.01)), ("cpu", 3.0 * (0.02 + 0.01))])
def test_a_wait_for_a_core_is_stretched_only_when_work_is_wall_time(clock: FakeTime, work: str,
                                                                     expected_s: float) -> None:
    slowed = SlowedRank(constant_slowdown(3.0), work=work)
    slowed.begin()
    start = clock.wall
    clock.compute(0.02)
    clock.wait_for_core(0.03)  # another process had the core
    slowed.after_bucket()  # first sample's end: stretched
    clock.compute(0.01)
    slowed.after_bucket()
    assert clock.wall - start == pytest.approx(expected_s, abs=1e-12)


def test_cpu_work_never_ends_before_the_real_work(clock: FakeTime) -> None:
    slowed = SlowedRank(constant_slowdown(2.0), work="cpu")
    slowed.begin()
    start = clock.wall
    clock.compute(0.01)
    clock.wait_for_core(0.5)  # waited longer than the stretch asks: no sleep, never earlier
    slowed.after_bucket()
    assert clock.wall - start == pytest.approx(0.51, abs=1e-12)


def test_an_unknown_work_clock_is_refused() -> None:
    with pytest.raises(ValueError, match="wall, cpu"):
        SlowedRank(constant_slowdown(2.0), work="gpu")
