"""ZipLine (ElasticBSP's barrier choice): the heap matches brute force, tie rule included.

The tie rule (lbsim/sizing/zipline.py): minimise ``(range, max, min, indices)`` -- the smallest
computed range, then the earliest barrier, then the earliest min, then each worker's earliest index.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.sizing.zipline import ZipLineChoice, predict_ends, zipline, zipline_ahead, zipline_bruteforce


def _check_consistent(ends: np.ndarray, c: ZipLineChoice) -> None:
    rows = np.asarray(ends, dtype=np.float64).tolist()
    assert len(c.indices) == len(c.times) == len(rows)
    assert all(isinstance(j, int) and 0 <= j < len(row) for j, row in zip(c.indices, rows, strict=True))
    assert c.times == tuple(row[j] for row, j in zip(rows, c.indices, strict=True))
    assert c.barrier_s == max(c.times)
    assert c.range_s == max(c.times) - min(c.times)
    assert c.range_s >= 0


def _same(a: ZipLineChoice, b: ZipLineChoice) -> None:
    assert a.range_s == b.range_s
    assert a.barrier_s == b.barrier_s
    assert a.indices == b.indices
    assert a.times == b.times


def _cursor_heap(ends: np.ndarray) -> tuple[float, tuple[int, ...]]:
    """The heap algorithm written literally: copy the cursors on every strict improvement (O(n) each)."""
    rows = np.asarray(ends, dtype=np.float64).tolist()
    cursor = [0] * len(rows)
    heap = [(row[0], p) for p, row in enumerate(rows)]
    heapq.heapify(heap)
    hi = max(row[0] for row in rows)
    best, best_cursor = math.inf, tuple(cursor)
    while True:
        lo, p = heap[0]
        if hi - lo < best:
            best, best_cursor = hi - lo, tuple(cursor)
        if cursor[p] + 1 == len(rows[p]):
            return best, best_cursor
        cursor[p] += 1
        v = rows[p][cursor[p]]
        hi = max(hi, v)
        heapq.heapreplace(heap, (v, p))


# --- strategies -----------------------------------------------------------------------------------

# coarse grids make ties (equal offsets, equal intervals, coinciding end times) common; free floats
# exercise rounding
_offset = st.one_of(st.integers(0, 6).map(float), st.sampled_from([0.5, 1.5, 0.1, 0.2, 0.3]),
                    st.floats(-5.0, 5.0, allow_nan=False))
_interval = st.one_of(st.sampled_from([1.0, 1.5, 2.0, 3.0, 0.5, 0.1, 0.0]), st.floats(0.0, 3.0, allow_nan=False))


@st.composite
def predicted(draw, max_n: int = 4, max_r: int = 6) -> np.ndarray:
    n = draw(st.integers(1, max_n))
    r = draw(st.integers(1, max_r))
    last = draw(st.lists(_offset, min_size=n, max_size=n))
    if draw(st.booleans()):  # all workers alike in speed
        interval = [draw(_interval)] * n
    else:
        interval = draw(st.lists(_interval, min_size=n, max_size=n))
    return predict_ends(last, interval, r)


_value = st.one_of(st.integers(-4, 8).map(float), st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False))


@st.composite
def sorted_rows(draw, max_n: int = 4, max_r: int = 6) -> np.ndarray:
    n = draw(st.integers(1, max_n))
    r = draw(st.integers(1, max_r))
    rows = [sorted(draw(st.lists(_value, min_size=r, max_size=r))) for _ in range(n)]
    return np.array(rows, dtype=np.float64)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.tuples(st.lists(_offset, min_size=n, max_size=n),
                                                       st.lists(_interval, min_size=n, max_size=n))),
       st.integers(1, 6))
def test_zipline_ahead_is_zipline_of_the_predictions(inputs, r: int) -> None:
    """ElasticBSP's call (the predictions not checked twice) chooses what zipline(predict_ends) does."""
    last, interval = inputs
    assert zipline_ahead(last, interval, r) == zipline(predict_ends(last, interval, r))


# --- heap == brute force --------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(predicted())
def test_matches_bruteforce_on_predicted_ends(ends: np.ndarray) -> None:
    heap, brute = zipline(ends), zipline_bruteforce(ends)
    _check_consistent(ends, heap)
    _check_consistent(ends, brute)
    _same(heap, brute)


@settings(max_examples=300, deadline=None)
@given(sorted_rows())
def test_matches_bruteforce_on_arbitrary_sorted_rows(ends: np.ndarray) -> None:
    heap, brute = zipline(ends), zipline_bruteforce(ends)
    _check_consistent(ends, heap)
    _same(heap, brute)


@settings(max_examples=100, deadline=None)
@given(st.one_of(predicted(max_n=40, max_r=30), sorted_rows(max_n=25, max_r=12)))
def test_matches_literal_cursor_heap_on_larger_inputs(ends: np.ndarray) -> None:
    """Rebuilding the indices by bisection gives exactly the cursors the heap held (too big for brute force)."""
    c = zipline(ends)
    best, cursors = _cursor_heap(ends)
    assert c.range_s == best
    assert c.indices == cursors


@settings(max_examples=100, deadline=None)
@given(predicted(max_n=6, max_r=5), st.randoms(use_true_random=False))
def test_no_random_choice_beats_it(ends: np.ndarray, rnd) -> None:
    c = zipline(ends)
    n, r = ends.shape
    for _ in range(50):
        times = [ends[p, rnd.randrange(r)] for p in range(n)]
        hi, lo = max(times), min(times)
        assert (c.range_s, c.barrier_s) <= (hi - lo, hi)


# --- hand-made examples ---------------------------------------------------------------------------

def test_identical_workers_meet_at_their_first_end() -> None:
    ends = predict_ends([3.0, 3.0, 3.0], [1.2, 1.2, 1.2], 15)
    c = zipline(ends)
    assert c.indices == (0, 0, 0) and c.range_s == 0.0 and c.barrier_s == pytest.approx(4.2)
    _same(c, zipline_bruteforce(predict_ends([3.0, 3.0, 3.0], [1.2, 1.2, 1.2], 6)))


def test_twice_as_slow_worker() -> None:
    ends = np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0]])
    c = zipline(ends)
    assert c == ZipLineChoice(indices=(1, 0), times=(2.0, 2.0), barrier_s=2.0, range_s=0.0)
    _same(c, zipline_bruteforce(ends))
    # the same thing from predict_ends: both pushed at 0, intervals 1 and 2
    assert zipline(predict_ends([0.0, 0.0], [1.0, 2.0], 4)) == c


def test_single_worker_takes_its_next_end() -> None:
    c = zipline(np.array([[5.0, 6.0, 7.0]]))
    assert c == ZipLineChoice(indices=(0,), times=(5.0,), barrier_s=5.0, range_s=0.0)
    assert zipline_bruteforce(np.array([[5.0, 6.0, 7.0]])) == c


def test_lookahead_one_is_the_plain_bsp_barrier() -> None:
    ends = np.array([[1.0], [3.5], [2.0]])
    c = zipline(ends)
    assert c == ZipLineChoice(indices=(0, 0, 0), times=(1.0, 3.5, 2.0), barrier_s=3.5, range_s=2.5)


def test_equal_ranges_go_to_the_earliest_barrier() -> None:
    # [0, 1] and [10, 11] both have range 1: the earlier barrier (1) wins
    c = zipline(np.array([[0.0, 10.0], [1.0, 11.0]]))
    assert c.indices == (0, 0) and c.barrier_s == 1.0 and c.range_s == 1.0
    # [0, 5] and [5, 10] both have range 5: barrier 5 wins; worker 1 has 1, 2, 3, 5 all inside
    # [0, 5] and takes its first
    ends = np.array([[0.0, 10.0, 10.0, 10.0], [1.0, 2.0, 3.0, 5.0], [5.0, 10.0, 10.0, 10.0]])
    c = zipline(ends)
    assert c.indices == (0, 0, 0) and c.barrier_s == 5.0 and c.range_s == 5.0
    _same(c, zipline_bruteforce(ends))


def test_within_the_window_each_worker_takes_its_first_time() -> None:
    # best window is [10, 12]; worker 2 could take 10 or 12 and takes 10; duplicates take the first copy
    ends = np.array([[0.0, 10.0, 10.0], [4.0, 5.0, 12.0], [10.0, 12.0, 30.0]])
    c = zipline(ends)
    assert c.indices == (1, 2, 0) and c.times == (10.0, 12.0, 10.0) and c.range_s == 2.0
    _same(c, zipline_bruteforce(ends))


def test_a_slow_worker_stretches_the_superstep() -> None:
    # intervals 1.0 and 1.5 from a common start meet exactly at 3.0 (3 vs 2 iterations)
    c = zipline(predict_ends([0.0, 0.0], [1.0, 1.5], 15))
    assert c.indices == (2, 1) and c.range_s == 0.0 and c.barrier_s == 3.0


def test_accepts_lists_and_integer_arrays() -> None:
    assert zipline([[1, 2, 3, 4], [2, 4, 6, 8]]).indices == (1, 0)
    assert zipline(np.array([[1, 2], [2, 4]], dtype=np.int64)).times == (2.0, 2.0)


# --- predict_ends ---------------------------------------------------------------------------------

def test_predict_ends_shape_and_values() -> None:
    last, interval = [0.5, 10.0, 3.25], [1.0, 0.1, 1.3]
    e = predict_ends(last, interval, 7)
    assert e.shape == (3, 7) and e.dtype == np.float64
    for p in range(3):
        assert e[p].tolist() == [last[p] + (j + 1) * interval[p] for j in range(7)]
    assert np.all(np.diff(e, axis=1) > 0)
    assert predict_ends([2.0], [0.0], 3).tolist() == [[2.0, 2.0, 2.0]]  # zero interval: constant row
    assert predict_ends(np.array([1.0, 2.0]), np.array([1.0, 1.0]), np.int64(2)).shape == (2, 2)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_offset, _interval), min_size=1, max_size=6), st.integers(1, 20))
def test_predict_ends_rows_are_sorted_and_exact(workers, r: int) -> None:
    last = [w[0] for w in workers]
    interval = [w[1] for w in workers]
    e = predict_ends(last, interval, r)
    assert e.shape == (len(workers), r)
    assert np.all(e[:, 1:] >= e[:, :-1])
    assert e.tolist() == [[lp + (j + 1) * iv for j in range(r)] for lp, iv in zip(last, interval, strict=True)]


# --- invalid input --------------------------------------------------------------------------------

@pytest.mark.parametrize("ends", [
    np.array([1.0, 2.0]),                        # 1-D
    np.zeros((2, 2, 2)),                         # 3-D
    np.zeros((0, 3)),                            # no workers
    np.zeros((3, 0)),                            # no lookahead
    np.array([[1.0, np.nan]]),
    np.array([[1.0, np.inf]]),
    np.array([[-np.inf, 1.0]]),
    np.array([[1.0, 2.0], [3.0, 2.5]]),         # row 1 not sorted
    np.array([["a", "b"]]),
    np.array([[True, True]]),
    np.array([[1 + 1j, 2 + 0j]]),
])
@pytest.mark.parametrize("fn", [zipline, zipline_bruteforce])
def test_invalid_ends_rejected(fn, ends) -> None:
    with pytest.raises(ValueError):
        fn(ends)


def test_unsorted_row_is_named() -> None:
    with pytest.raises(ValueError, match="row 1"):
        zipline(np.array([[1.0, 2.0], [3.0, 2.5]]))


def test_bruteforce_refuses_huge_inputs() -> None:
    with pytest.raises(ValueError, match="too large"):
        zipline_bruteforce(predict_ends([0.0] * 12, [1.0] * 12, 15))


@pytest.mark.parametrize("args", [
    ([0.0], [1.0], 0),
    ([0.0], [1.0], -3),
    ([0.0], [1.0], 2.0),
    ([0.0], [1.0], True),
    ([0.0, 1.0], [1.0], 3),                      # lengths differ
    ([], [], 3),                                 # no workers
    ([[0.0]], [[1.0]], 3),                       # 2-D
    ([0.0], [-1.0], 3),                          # negative interval
    ([np.nan], [1.0], 3),
    ([0.0], [np.inf], 3),
    ([1e308], [1e308], 3),                       # overflows
])
def test_predict_ends_rejects_bad_input(args) -> None:
    with pytest.raises(ValueError):
        predict_ends(*args)
