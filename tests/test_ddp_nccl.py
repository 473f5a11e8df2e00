"""The NCCL/CUDA path of lbsim.runtime.ddp: run where GPUs exist, skipped cleanly where they do not.

* one GPU: the CUDA step clock measures kernels (CUDA events), not their launch; a 1-rank NCCL
  group with the weighted hook gives the plain gradient (weight 1);
* two GPUs or more: 2 NCCL ranks, unequal batches, the weighted hook equals one process on the
  concatenated batch (1e-6, float64), as tests/test_ddp_aggregation.py checks on gloo.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
needs_gpu = pytest.mark.skipif(GPUS < 1, reason="no CUDA GPU")
needs_two = pytest.mark.skipif(GPUS < 2, reason="fewer than 2 CUDA GPUs")
STEPS = [(3, 13), (11, 5), (2, 14)]


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4)).double()


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    total = sum(sum(s) for s in STEPS)
    return torch.randn(total, 12, generator=g, dtype=torch.float64), torch.randint(0, 4, (total,), generator=g)


def _rank(rank: int, world: int, rendezvous: str, out: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from lbsim.runtime.ddp import LoadBalancer, end_group

    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    model = DDP(_net().to(dev), device_ids=[rank], bucket_cap_mb=0.001)
    lb = LoadBalancer(sum(STEPS[0]), variant="gpu_model")
    assert lb.device == dev
    lb.attach(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    x, y = _data()
    pos = 0
    for step in STEPS:
        b = step if world == 2 else (sum(step),)
        lb.begin_step(b)
        lo = pos + sum(b[:rank])
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[lo:lo + b[rank]].to(dev)), y[lo:lo + b[rank]].to(dev)).backward()
        opt.step()
        pos += sum(b)
    assert lb.clock.marked and lb.clock.elapsed_s() > 0
    if rank == 0:
        Path(out).write_text(json.dumps([p.detach().cpu().flatten().tolist() for p in model.parameters()]))
    del model  # its Reducer must not be what frees the group (lbsim.runtime.ddp.teardown)
    end_group()


def _reference() -> list[torch.Tensor]:
    net = _net()
    opt = torch.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
    x, y = _data()
    pos = 0
    for step in STEPS:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x[pos:pos + sum(step)]), y[pos:pos + sum(step)]).backward()
        opt.step()
        pos += sum(step)
    return [p.detach().flatten() for p in net.parameters()]


def _worst(world: int, tmp_path: Path) -> float:
    out = tmp_path / "params.json"
    mp.start_processes(_rank, args=(world, str(tmp_path / "rendezvous"), str(out)), nprocs=world, start_method="spawn")
    got = json.loads(out.read_text())
    return max(float((torch.tensor(g, dtype=torch.float64) - r).abs().max()) for g, r in zip(got, _reference(), strict=True))


@needs_gpu
def test_cuda_clock_measures_kernels_not_launches() -> None:
    from lbsim.runtime.ddp import StepClock

    dev = torch.device("cuda", 0)
    a = torch.randn(4096, 4096, device=dev)
    (a @ a).norm()  # cuBLAS's one-off set-up (~0.1 s of host time, which the GPU's clock would count as idle)
    torch.cuda.synchronize(dev)
    clock = StepClock(dev)
    clock.start()
    for _ in range(20):
        a = a @ a
        a = a / a.norm()
    clock.mark()
    measured = clock.elapsed_s()
    # the kernels' own time, measured again with a full synchronisation
    torch.cuda.synchronize(dev)
    import time

    t = time.perf_counter()
    for _ in range(20):
        a = a @ a
        a = a / a.norm()
    torch.cuda.synchronize(dev)
    synced = time.perf_counter() - t
    assert 0.5 * synced < measured < 2.0 * synced


@needs_gpu
def test_a_lap_read_later_is_the_same_time_and_does_not_block_the_step() -> None:
    """``lap()`` records no synchronisation: the host returns while the GPU still works; reading the
    lap later gives the kernels' time, as reading it at once does."""
    from lbsim.runtime.ddp import StepClock

    dev = torch.device("cuda", 0)
    a = torch.randn(4096, 4096, device=dev)
    (a @ a).norm()
    torch.cuda.synchronize(dev)
    clock = StepClock(dev)
    clock.start()
    for _ in range(40):
        a = a @ a
        a = a / a.norm()
    clock.mark()
    lap = clock.lap()
    assert not torch.cuda.Event.query(clock._last_ev)  # the GPU is still busy: lap() did not wait for it
    later = lap.seconds()
    assert later > 0 and lap.seconds() == later


@needs_gpu
def test_nccl_one_rank_weighted_hook_is_plain_training(tmp_path: Path) -> None:
    assert _worst(1, tmp_path) < 1e-6


@needs_two
def test_nccl_two_ranks_weighted_hook_equals_concatenated_batch(tmp_path: Path) -> None:
    assert _worst(2, tmp_path) < 1e-6
