"""Shared helpers for the engine tests: build a scenario from plain data, run it, check invariants.

One session fixture, ``sim``, so that hypothesis tests can use it too (no function-scoped state).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO / "scenarios" / "traces"

# Property tests draw the same examples on every run (seeded from each test): a commit's suite passes
# or fails the same way each time, so CI is never failed by a rare draw of code nobody changed.
# ``pytest --hypothesis-profile=explore`` draws new examples, to look for such cases (one found this
# way: tests/test_lbbsp_dead_band.py's @example).
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("repeatable")


def pytest_configure(config: pytest.Config) -> None:
    """One fork server per session serves both the sweeps' process pools and the runtime's ranks; whichever
    starts it first, it preloads what ranks need (:data:`lbsim.runtime.launch.PRELOAD`), so a sweep test
    that runs first does not leave every later rank importing torch itself."""
    from lbsim.runtime.launch import preload_fork_server

    preload_fork_server()


def group(count: int = 1, speed: float = 100.0, *, t0: float = 0.0, bw: float = 8.0, max_batch: int = 100_000,
          jitter: float = 0.0, instance: str = "g4dn.xlarge") -> dict[str, Any]:
    """A worker group with every figure given inline (exact arithmetic, no catalog figures)."""
    return {"instance": instance, "count": count, "t0_s": t0, "samples_per_s": speed, "max_batch": max_batch,
            "bandwidth_gbps": bw, "jitter_cv": jitter}


def ps(*, server_gbps: float = 8.0, shards: int = 1, apply_s: float = 0.0, latency_s: float = 0.0) -> dict[str, Any]:
    return {"name": "parameter_server", "shards": shards, "server_bandwidth_gbps": server_gbps,
            "apply_s": apply_s, "latency_s": latency_s}


def ring(*, alpha_s: float = 0.0, bandwidth_gbps: float | None = None) -> dict[str, Any]:
    return {"name": "ring_allreduce", "alpha_s": alpha_s, "bandwidth_gbps": bandwidth_gbps}


def data(groups: list[dict[str, Any]], *, network: dict[str, Any], scheme: dict[str, Any] | str,
         global_batch: int, gradient_bytes: int = 1_000_000, updates: int | None = 10,
         time_budget_s: float | None = None, contention: list[dict[str, Any]] | tuple = (),
         seed: int = 0) -> dict[str, Any]:
    return {
        "seed": seed,
        "workload": {"model": "resnet50_imagenet", "global_batch": global_batch, "updates": updates,
                     "time_budget_s": time_budget_s, "gradient_bytes": gradient_bytes},
        "cluster": {"groups": list(groups)},
        "network": network,
        "contention": list(contention),
        "scheme": {"name": scheme} if isinstance(scheme, str) else scheme,
    }


def scenario(groups: list[dict[str, Any]], **kw: Any):  # -> Scenario
    from lbsim.scenario.loader import scenario_from_data

    return scenario_from_data(data(groups, **kw))


def run(groups: list[dict[str, Any]], **kw: Any):  # -> RunResult
    from lbsim.simulator.run import simulate

    return simulate(scenario(groups, **kw))


def check_invariants(result: Any, *, strict_update_times: bool = True, update_before_end: bool = True) -> None:
    """Invariants every run must satisfy (see lbsim.metrics.records / summary / run_end).

    Every update's gradients and samples match the records that name it, exactly, however the run
    ended: an iteration the end cut is recorded up to the end (marked ``cut``).
    """
    its, ups, summary = result.iterations, result.updates, result.summary
    assert ups, "a run must make at least one update"
    for r in its:
        total = r.compute_s + r.comm_s + r.wait_s + r.fetch_s
        assert abs(total - (r.end_s - r.start_s)) <= 1e-9, r
        assert r.compute_s >= 0 and r.comm_s >= -1e-12 and r.wait_s >= -1e-12 and r.fetch_s >= 0, r
        assert r.end_s >= r.start_s, r
        assert r.dropped == (r.update == -1), r
        if not r.dropped:
            u = ups[r.update]
            # the gradient is applied after the worker fetched and computed it and before its iteration ended
            assert r.start_s + r.fetch_s + r.compute_s - 1e-9 <= u.time_s, (r, u)
            assert u.time_s <= r.end_s + 1e-9 or not update_before_end, (r, u)  # WBSP: rounds close later
    # updates: numbered in order, strictly increasing in time
    assert [u.update for u in ups] == list(range(len(ups)))
    for a, b in zip(ups, ups[1:], strict=False):
        assert (b.time_s > a.time_s) if strict_update_times else (b.time_s >= a.time_s), (a, b)
    # each worker: iterations 0, 1, 2, ... back to back (never idle outside a record)
    by_worker = defaultdict(list)
    for r in its:
        by_worker[r.worker].append(r)
    for rs in by_worker.values():
        rs.sort(key=lambda r: r.iteration)
        assert [r.iteration for r in rs] == list(range(len(rs)))
        assert rs[0].start_s == 0
        for a, b in zip(rs, rs[1:], strict=False):
            assert b.start_s == a.end_s, (a, b)
    # summary agrees with the records
    assert summary["samples"] == sum(u.samples for u in ups)
    assert summary["updates"] == len(ups)
    assert summary["worker_iterations"] == sum(not r.dropped for r in its)
    assert summary["dropped_iterations"] == sum(r.dropped for r in its)
    fractions = ("compute_fraction", "comm_fraction", "wait_fraction", "fetch_fraction")
    assert abs(sum(summary[k] for k in fractions) - 1.0) <= 1e-9 or not its
    # gradients and samples of each update match the records that name it
    grads, samples = Counter(), Counter()
    for r in its:
        if not r.dropped:
            grads[r.update] += 1
            samples[r.update] += r.batch
    for u in ups:
        assert (grads[u.update], samples[u.update]) == (u.gradients, u.samples), (u, grads[u.update], samples[u.update])
    assert sum(r.batch for r in its if not r.dropped) == summary["samples"]
    assert all(r.end_s <= summary["sim_time_s"] + 1e-9 for r in its)


@pytest.fixture(scope="session")
def sim() -> SimpleNamespace:
    return SimpleNamespace(group=group, ps=ps, ring=ring, data=data, scenario=scenario, run=run,
                           check_invariants=check_invariants, REPO=REPO, TRACES=TRACES)


# -- one set of 3 gloo ranks for the DDP-library tests ---------------------------------------------
# Starting ranks costs more than these modules' jobs, so the modules below
# share one start of 3 ranks: each defines ``_rank(rank, rendezvous, out)`` (its own process group, from a
# FileStore rendezvous file of its own, torn down at the end) and the ranks run the jobs of the
# collected modules one after another. A module's fixture reads its job's output from ``ddp3[name]``.
DDP3_MODULES = ("test_ddp_aggregation", "test_ddp_balancer", "test_ddp_lengths")


def _ddp3_rank(rank: int, jobs: list[tuple[str, str, str]]) -> None:
    import importlib

    for module, rendezvous, out in jobs:
        importlib.import_module(module)._rank(rank, rendezvous, out)


@pytest.fixture(scope="session")
def ddp3(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each collected DDP module's ``out`` path (its job's output; the balancer's: one file per rank suffix)."""
    from rank_harness import start_ranks

    wanted = {item.module.__name__ for item in request.session.items if item.module is not None}  # type: ignore[attr-defined]
    names = [m for m in DDP3_MODULES if m in wanted] or [request.module.__name__]
    outs, jobs = {}, []
    for name in names:
        folder = tmp_path_factory.mktemp(name)
        outs[name] = folder / "out"
        jobs.append((name, str(folder / "rendezvous"), str(outs[name])))
    start_ranks(_ddp3_rank, (jobs,), 3)
    return outs
