"""The tests' rank harness: a rank that hangs fails the test, with its stack, instead of holding the run."""

from __future__ import annotations

import time

import pytest
from rank_harness import start_ranks

pytest.importorskip("torch")


def _stuck_in_a_sleep(rank: int, seconds: float) -> None:
    if rank == 1:
        time.sleep(seconds)


def _fails(rank: int) -> None:
    if rank == 0:
        raise ValueError("rank 0's own error")


def test_a_hung_rank_fails_with_its_stack() -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError) as caught:
        start_ranks(_stuck_in_a_sleep, (3600.0,), 2, timeout_s=2.0)
    assert time.monotonic() - started < 60
    told = str(caught.value)
    assert "rank1.txt, hung after 2 s" in told and "_stuck_in_a_sleep" in told
    assert "rank0.txt" not in told  # the rank that finished left no stack


def test_ranks_that_finish_in_time_pass_and_an_error_is_the_ranks_own() -> None:
    start_ranks(_stuck_in_a_sleep, (0.1,), 2, timeout_s=60.0)
    with pytest.raises(Exception, match="rank 0's own error"):
        start_ranks(_fails, (), 2, timeout_s=60.0)
