"""The DDP recorder on 2 gloo ranks (one spawn): observe mode on a plain DDP loop, balancing mode with
LoadBalancer, a job killed before closing; every recording read back by the torch-free reader."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch
from rank_harness import start_ranks

from lbsim.recording import read_recording

PER_SAMPLE_S = 0.004
B = 8
STEPS = 6


class Sleepy(torch.nn.Module):
    """A linear layer whose forward takes PER_SAMPLE_S per sample (a machine-independent speed)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(PER_SAMPLE_S * len(x))
        return self.a(x)


def _rank(rank: int, rendezvous: str, out: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from lbsim.runtime.ddp import LoadBalancer, Recorder, SlowedRank, constant_slowdown, end_group

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=2)
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    # observe mode: the plain DDP loop, equal batches, rank 1 slowed 3x
    model = DDP(Sleepy())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    slowed = SlowedRank(constant_slowdown(3.0)) if rank == 1 else None
    rec = Recorder(f"{out}/observe", flush_every=4)
    rec.attach(model, slowed=slowed)
    for k in range(STEPS):
        if slowed is not None:
            slowed.begin()
        rec.begin(B // 2)
        model(x[k * 4:(k + 1) * 4]).sum().backward()
        rec.synced()
        opt.step()
        rec.end()
    rec.close()
    # balancing mode: the balancer's clock and hook, tokens recorded
    slowed = SlowedRank(constant_slowdown(3.0)) if rank == 1 else None
    lb = LoadBalancer(B, variant="cpu", predictor="last", slowed=slowed, decide_every=1, lag=0)
    model = DDP(Sleepy())
    lb.attach(model)
    rec = Recorder(f"{out}/balance", balancer=lb, flush_every=5)
    for idx in lb.sampler(B * STEPS, seed=1):
        rec.begin(len(idx), tokens=7 * len(idx))
        model(x[idx]).sum().backward()
        rec.synced()
        rec.end()
    lb.finish()
    rec.close()
    # killed: two flushes of two steps, the fifth step never flushed, no close
    rec = Recorder(f"{out}/killed", flush_every=2)
    model = DDP(Sleepy())
    rec.attach(model)
    for k in range(5):
        rec.begin(B // 2)
        model(x[k * 4:(k + 1) * 4]).sum().backward()
        rec.synced()
        rec.end()
    del model  # its Reducer must not be what frees the group (lbsim.runtime.ddp.teardown)
    end_group()


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("rec")
    start_ranks(_rank, (str(folder / "rendezvous"), str(folder)), 2)
    return folder


def test_observe_mode_sees_the_slow_rank_behind_ddps_wait(jobs: Path) -> None:
    rec = read_recording(jobs / "observe")
    assert rec.complete and rec.scheme == {"name": "bsp"} and rec.ranks == 2 and rec.steps_used == STEPS
    assert (rec.samples == B // 2).all() and rec.tokens is None
    c = np.median(rec.compute_s[:, 1:], axis=1)  # step 0 is DDP's warm-up
    assert 2.3 < c[1] / c[0] < 3.7  # the slow rank's own work, not the wait
    # rank 0's backward waits for rank 1: its tail holds the difference, rank 1's does not
    tail = np.median(rec.tail_s[:, 1:], axis=1)
    assert tail[0] > 0.7 * (c[1] - c[0]) and tail[1] < 0.5 * (c[1] - c[0])
    assert rec.gradient_bytes == (4 * 2 + 2) * 4


def test_balancing_mode_records_the_balancers_batches_and_tokens(jobs: Path) -> None:
    rec = read_recording(jobs / "balance")
    assert rec.scheme["name"] == "lbbsp" and rec.scheme["variant"] == "cpu" and rec.scheme["predictor"] == "last"
    assert (rec.samples.sum(axis=0) == B).all()
    assert rec.samples[1, -1] < rec.samples[0, -1]  # the slow rank got the smaller batch
    assert rec.tokens is not None and (rec.tokens == 7 * rec.samples).all()


def test_killed_job_is_readable_up_to_its_last_flush(jobs: Path) -> None:
    rec = read_recording(jobs / "killed")
    assert not rec.complete and rec.steps_used == 4
