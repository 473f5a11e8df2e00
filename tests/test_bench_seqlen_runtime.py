"""The sequence-length runtime benchmark's own logic: its workload, its bucketing rule against the
simulator's, and the decomposition of a step's timestamps (no timing is measured here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from lbsim.samples.rounds import RoundSamples
from lbsim.schemes.base import SchemeContext
from lbsim.schemes.bucketing import Bucketing, BucketingConfig

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_seqlen_runtime", ROOT / "benchmarks" / "bench_seqlen_runtime.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_workload_is_the_scaled_histogram_and_the_simulators_draw(bench, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = bench.write_lengths(tmp_path)
    rows = np.loadtxt(bench.LENGTHS_FILE, skiprows=1, dtype=np.int64)
    hist = np.loadtxt(f, delimiter=",", skiprows=1, dtype=np.int64)
    assert hist[:, 1].sum() == len(rows)
    assert hist[0, 0] >= 2 and hist[-1, 0] == bench.CAP  # the longest conversations are capped
    lengths, ref = bench.step_lengths(f, 3, 12)
    again, _ = bench.step_lengths(f, 4, 12)
    assert lengths.shape == (3, 12) and np.array_equal(lengths, again[:3])  # round k's draw depends on k only
    assert set(np.unique(lengths)) <= set(hist[:, 0].tolist())
    assert ref == pytest.approx(float((hist[:, 0] * hist[:, 1]).sum() / hist[:, 1].sum()))


def test_bucketing_rule_is_the_simulators(bench) -> None:  # type: ignore[no-untyped-def]
    world, B = 3, 12  # noqa: N806
    lengths = np.array([5, 9, 5, 30, 2, 9, 14, 5, 7, 30, 1, 8])  # ties keep their draw order
    ctx = SchemeContext(global_batch=B, t0_s=(0.0,) * world, samples_per_s=(1.0,) * world, max_batch=(B,) * world,
                        kinds=("gpu",) * world)
    owner = Bucketing(BucketingConfig(), ctx).assign_samples(RoundSamples(lengths, lengths.astype(float), False, None))
    for rank in range(world):
        mine = bench._mine(None, "bucketing", list(range(B)), lengths, rank, world)
        assert sorted(mine) == np.flatnonzero(owner == rank).tolist()


def _record(pre: float, compute: float, allreduce_end: float, end: float, samples: int, fit: float) -> list[float]:
    return [pre, pre + compute, allreduce_end, end, 0.0, samples, fit, compute]


def test_decompose_recovers_the_phases(bench) -> None:  # type: ignore[no-untyped-def]
    # two ranks, three steps (the first is skipped); rank 1 slowed 2x: its fitted 0.030 s predicts 0.060 s
    steps_r0 = [_record(0.001, 0.100, 0.200, 0.201, 4, 0.050),
                _record(0.002, 0.040, 0.072, 0.073, 4, 0.040),
                _record(0.004, 0.050, 0.074, 0.076, 4, 0.050)]
    steps_r1 = [_record(0.001, 0.150, 0.200, 0.201, 2, 0.070),
                _record(0.002, 0.060, 0.072, 0.073, 2, 0.030),
                _record(0.004, 0.066, 0.074, 0.076, 2, 0.033)]
    d = bench.decompose([steps_r0, steps_r1], slow_ranks=1, slowdown=2.0, skip=1)
    assert d["step"] == pytest.approx((0.073 + 0.076) / 2)
    assert d["balancer"] == pytest.approx((0.002 + 0.004) / 2)
    assert d["compute"] == pytest.approx([0.045, 0.063])
    assert d["compute_max"] == pytest.approx(0.063)
    assert d["wait"] == pytest.approx([0.018, 0.0])
    assert d["tail"] == pytest.approx(((0.072 - 0.062) + (0.074 - 0.070)) / 2)
    assert d["optimizer"] == pytest.approx((0.001 + 0.002) / 2)
    assert d["fit"] == pytest.approx([0.045, 0.063])
    assert d["ratio"] == pytest.approx([1.0, 1.0])  # the fitted costs (x2 on the slowed rank) were exact
    assert d["ratio_cv"] == pytest.approx([0.0, 0.0], abs=1e-12)
    assert d["samples"] == [4.0, 2.0]


def test_shares_and_jitter_separate_each_ranks_noise_from_the_hosts(bench) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    host = np.exp(rng.normal(0.0, 0.4, 400))  # every rank alike, round by round
    typical = np.array([1.2, 1.5, 1.5])[:, None]  # rank 0 fast, ranks 1 and 2 slowed
    alike = bench.shares_and_jitter((typical * host).tolist(), slow_ranks=2)
    assert alike["jitter_cv"] == pytest.approx(0.0, abs=1e-9)  # the host's moves unbalance nothing
    assert alike["round_cv"] == pytest.approx(np.sqrt(np.expm1(0.16)), rel=0.1)
    own = np.exp(rng.normal(-0.02, 0.2, (3, 400)))
    mixed = bench.shares_and_jitter((typical * host * own).tolist(), slow_ranks=2)
    assert mixed["jitter_cv"] == pytest.approx(np.sqrt(np.expm1(0.04)), rel=0.1)
    assert mixed["share"]["slow"] == pytest.approx(1.5 * float(host.mean()) * np.exp(-0.02), rel=0.05)  # the mean step's
    assert mixed["share"]["fast"] / mixed["share"]["slow"] == pytest.approx(1.2 / 1.5, rel=0.05)


def test_pinning_gives_fast_ranks_a_core_each_and_slowed_ranks_the_rest(bench) -> None:  # type: ignore[no-untyped-def]
    assert bench.rank_cores(3, 2, [0, 1]) == [[0], [1], [1]]  # the 2-core host: the slowed ranks share core 1
    assert bench.rank_cores(4, 2, [0, 1, 2]) == [[0], [1], [2], [2]]
    assert bench.rank_cores(4, 2, list(range(16))) == [[0], [1], [2], [3]]  # a core per rank where there are enough
    assert bench.rank_cores(3, 1, [4, 7]) is None  # two fast ranks take both cores: nothing left for the slowed one
