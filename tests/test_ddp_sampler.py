"""The per-rank batch sampler (lbsim.runtime.ddp.sampler) without processes: n samplers, one per rank.

Every rank's sampler is driven by the same sequence of decisions (what the balancer's broadcast
guarantees); the property: over an epoch the ranks' batches partition the dataset (every sample
once), every step but the last has exactly the global batch, each rank's batch is the decided one,
and ``len(sampler)`` is the number of steps. Plus the tail rules and a bad input.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.runtime.ddp.balancer import UNCAPPED, LoadBalancer
from lbsim.runtime.ddp.sampler import BalancedBatchSampler
from lbsim.sizing.split import proportional_split


class Scripted:
    """A balancer stand-in for one rank: decisions from a script, the real split of the epoch's tail."""

    split = LoadBalancer.split

    def __init__(self, rank: int, world: int, global_batch: int, script: Sequence[tuple[int, ...]]) -> None:
        self.rank, self.world, self.global_batch = rank, world, global_batch
        self.caps = (UNCAPPED,) * world
        self.script = list(script)
        self.calls = 0
        self.steps: list[tuple[int, ...]] = []

    def next_batches(self) -> tuple[int, ...]:
        b = self.script[self.calls % len(self.script)]
        self.calls += 1
        return b

    def begin_step(self, batches: Sequence[int]) -> None:
        self.steps.append(tuple(batches))


def _epoch(n_samples: int, world: int, big: int, script: list[tuple[int, ...]], *, drop_last: bool = False,
           epoch: int = 0) -> tuple[list[list[list[int]]], list[Scripted], int]:
    lbs = [Scripted(r, world, big, script) for r in range(world)]
    samplers = [BalancedBatchSampler(lb, n_samples, seed=3, drop_last=drop_last) for lb in lbs]
    for s in samplers:
        s.set_epoch(epoch)
    per_rank = [list(s) for s in samplers]
    return per_rank, lbs, len(samplers[0])


@st.composite
def cases(draw: st.DrawFn) -> tuple[int, int, int, list[tuple[int, ...]], bool]:
    world = draw(st.integers(1, 4))
    big = draw(st.integers(world, 40))
    n = draw(st.integers(big, 150))
    script = []
    for _ in range(draw(st.integers(1, 4))):
        weights = draw(st.lists(st.floats(0.1, 10.0), min_size=world, max_size=world))
        script.append(proportional_split(big, weights, [UNCAPPED] * world))
    return n, world, big, script, draw(st.booleans())


@settings(max_examples=60, deadline=None)
@given(cases())
def test_an_epoch_is_partitioned_across_ranks_and_steps(case: tuple[int, int, int, list[tuple[int, ...]], bool]) -> None:
    n, world, big, script, drop_last = case
    per_rank, lbs, steps = _epoch(n, world, big, script, drop_last=drop_last)
    assert all(len(p) == steps for p in per_rank)
    assert all(lb.steps == lbs[0].steps for lb in lbs)  # identical step batches on every rank
    seen = sorted(i for p in per_rank for batch in p for i in batch)
    expected = n - n % big if drop_last else n
    assert len(seen) == expected and len(set(seen)) == expected and set(seen) <= set(range(n))
    for k in range(steps):
        sizes = tuple(len(per_rank[r][k]) for r in range(world))
        assert sizes == lbs[0].steps[k]
        if k < steps - 1 or n % big == 0 or drop_last:
            assert sizes == script[k % len(script)]  # the decided batches, exactly
        assert min(sizes) >= 1


def test_tail_rules() -> None:
    # 3 ranks, B = 10. 25 samples: a 5-sample last step split like the decision (5:3:2 -> 3:1:1 or so)
    per_rank, lbs, steps = _epoch(25, 3, 10, [(5, 3, 2)])
    assert steps == 3 and lbs[0].steps[:2] == [(5, 3, 2)] * 2 and sum(lbs[0].steps[2]) == 5
    assert lbs[0].steps[2] == proportional_split(5, (5, 3, 2), [UNCAPPED] * 3)
    # 21 samples: 1 left over (< 3 ranks) joins the last step (11 samples)
    per_rank, lbs, steps = _epoch(21, 3, 10, [(5, 3, 2)])
    assert steps == 2 and lbs[0].steps == [(5, 3, 2), proportional_split(11, (5, 3, 2), [UNCAPPED] * 3)]
    # drop_last: 25 samples -> 2 steps of exactly (5, 3, 2)
    per_rank, lbs, steps = _epoch(25, 3, 10, [(5, 3, 2)], drop_last=True)
    assert steps == 2 and lbs[0].steps == [(5, 3, 2)] * 2


def test_epochs_reshuffle_and_seed_fixes_the_order() -> None:
    a, _, _ = _epoch(30, 2, 10, [(6, 4)], epoch=0)
    b, _, _ = _epoch(30, 2, 10, [(6, 4)], epoch=1)
    c, _, _ = _epoch(30, 2, 10, [(6, 4)], epoch=0)
    assert a == c and a != b


def test_dataset_smaller_than_global_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="smaller than the global batch 10"):
        BalancedBatchSampler(Scripted(0, 2, 10, [(5, 5)]), 9)


def test_balancer_refuses_the_oracle_and_a_missing_process_group() -> None:
    with pytest.raises(ValueError, match="oracle.*only in the simulator; valid here: narx, ema, last"):
        LoadBalancer(8, predictor="oracle")
    with pytest.raises(ValueError, match="valid variants auto, cpu, gpu, gpu_model; predictors narx, ema, last"):
        LoadBalancer(8, variant="fast")
    with pytest.raises(RuntimeError, match="init_process_group"):
        LoadBalancer(8)
