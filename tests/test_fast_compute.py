"""The fast path's one-call compute end and own-link time equal the event path's rules, float for float,
under every kind of source."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lbsim.contention.model import WorkerContention
from lbsim.contention.sources import IterationSeries, MarkovSource, PeriodicSeries, window
from lbsim.network.parameter_server import link_s
from lbsim.simulator.compute import iteration_end_s
from lbsim.simulator.fast_compute import compute_end_of
from lbsim.simulator.fast_server import own_link_of
from lbsim.workers import ComputeCurve, WorkerSpec


def _contention(kinds: list[str], jitter_cv: float, seed: int) -> WorkerContention:
    """One worker's contention of the given kinds (the same object twice for the same arguments)."""
    c = WorkerContention(jitter_cv=jitter_cv, rng=np.random.default_rng(seed) if jitter_cv > 0 else None)
    for k, kind in enumerate(kinds):
        if kind == "window":
            c.compute.append(window(0.05 * (k + 1), 0.05 * (k + 1) + 0.3, 2.0 + k))
        elif kind == "markov":
            c.compute.append(MarkovSource(np.random.default_rng(seed + 100 + k), mean_off_s=0.2, mean_on_s=0.1,
                                          slowdown_min=1.5, slowdown_max=4.0))
        elif kind == "periodic":
            c.compute.append(PeriodicSeries(np.array([1.0, 2.5, 1.2]), bucket_s=0.07, offset=k))
        else:
            c.iterations.append(IterationSeries(np.array([1.0, 1.3, 0.8, 2.0])))
    return c


@settings(max_examples=60, deadline=None)
@given(kinds=st.lists(st.sampled_from(["window", "markov", "periodic", "series"]), max_size=3),
       jitter=st.sampled_from([0.0, 0.2]), curve=st.booleans(), seed=st.integers(0, 50),
       plan=st.lists(st.tuples(st.floats(0.0, 0.2), st.sampled_from([8, 8, 8, 32])), min_size=1, max_size=150))
def test_compute_end_of_equals_iteration_end_s(kinds, jitter, curve, seed, plan) -> None:
    spec = WorkerSpec(index=0, group=0, instance="x", kind="gpu", t0_s=0.01, samples_per_s=400.0, max_batch=64,
                      bandwidth_gbps=10.0, jitter_cv=jitter,
                      compute_curve=ComputeCurve((1.0, 16.0, 64.0), (0.02, 0.05, 0.2)) if curve else None)
    reference, ours = _contention(kinds, jitter, seed), _contention(kinds, jitter, seed)
    end = compute_end_of(ours, spec)
    start = 0.0
    for it, (gap, batch) in enumerate(plan):  # iterations in order, each starting after the last one ended
        expected = iteration_end_s(reference, spec, start, batch, it)
        assert end((start, batch, it)) == expected
        start = expected + gap


@settings(max_examples=40, deadline=None)
@given(kinds=st.lists(st.sampled_from(["window", "markov", "periodic"]), max_size=3), seed=st.integers(0, 50),
       gaps=st.lists(st.floats(0.0, 0.1), min_size=1, max_size=150))
def test_own_link_of_equals_link_s_of_the_network_factor(kinds, seed, gaps) -> None:
    reference, ours = _contention(kinds, 0.0, seed), _contention(kinds, 0.0, seed)
    reference.network, ours.network = reference.compute, ours.compute  # the same sources, on the network
    own = own_link_of(ours, 4e6, 1.25e9)
    now = 0.0
    for gap in gaps:  # transfers requested at non-decreasing times
        assert own(now) == link_s(4e6, reference.network_factor(now), 1.25e9)
        now += gap
