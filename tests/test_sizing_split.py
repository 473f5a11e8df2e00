"""Invariants of splitting a global batch (lbsim.sizing.split), on seeded random inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.sizing.split import InfeasibleSplit, even_split, proportional_split


@st.composite
def split_inputs(draw):
    n = draw(st.integers(1, 12))
    weights = draw(st.lists(st.floats(0.01, 1000.0), min_size=n, max_size=n))
    caps = draw(st.lists(st.integers(1, 500), min_size=n, max_size=n))
    total = draw(st.integers(n, max(n, sum(caps))))
    return total, weights, caps


@settings(max_examples=300, deadline=None)
@given(split_inputs())
def test_sum_caps_and_minimum(inp) -> None:
    total, weights, caps = inp
    x = proportional_split(total, weights, caps)
    assert sum(x) == total
    assert all(1 <= xi <= c for xi, c in zip(x, caps, strict=False))


@settings(max_examples=300, deadline=None)
@given(split_inputs())
def test_larger_weight_never_gets_fewer_samples_unless_capped(inp) -> None:
    total, weights, caps = inp
    x = proportional_split(total, weights, caps)
    for i in range(len(x)):
        for j in range(len(x)):
            if weights[i] > weights[j] and x[i] < x[j]:
                assert x[i] == caps[i], (weights, caps, x)


@settings(max_examples=200, deadline=None)
@given(split_inputs(), st.floats(0.001, 1000.0))
def test_scaling_all_weights_changes_nothing(inp, k) -> None:
    total, weights, caps = inp
    scaled = [w * k for w in weights]
    assert proportional_split(total, weights, caps) == proportional_split(total, scaled, caps)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), st.integers(1, 10_000), st.floats(0.1, 100.0))
def test_equal_weights_split_evenly(n, per, w) -> None:
    total = n * per + (per % n)
    x = proportional_split(total, [w] * n, [10**9] * n)
    assert max(x) - min(x) <= 1
    assert sorted(x, reverse=True) == sorted(even_split(total, n), reverse=True)


def test_proportional_exact_case() -> None:
    assert proportional_split(100, [3, 1], [1000, 1000]) == (75, 25)
    assert proportional_split(100, [3, 1], [60, 1000]) == (60, 40)  # cap, remainder redistributed


def test_even_split_gives_remainder_to_the_first() -> None:
    assert even_split(10, 4) == (3, 3, 2, 2)


def test_infeasible() -> None:
    with pytest.raises(InfeasibleSplit, match="memory caps"):
        proportional_split(100, [1, 1], [10, 20])
    with pytest.raises(InfeasibleSplit, match="min batch"):
        proportional_split(3, [1, 1], [10, 20], min_batch=2)


def test_rejects_bad_weights() -> None:
    with pytest.raises(ValueError):
        proportional_split(10, [1.0, 0.0], [10, 10])
    with pytest.raises(ValueError):
        proportional_split(10, [1.0, float(np.nan)], [10, 10])
