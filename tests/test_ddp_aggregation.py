"""The weighted DDP hook (lbsim.runtime.ddp) equals single-process training on the concatenated batch.

2 and 3 gloo ranks (torch.multiprocessing), unequal batches that change every step, a real
multi-layer ``nn.Module`` (conv, batch-free, linear layers) with tiny DDP buckets so that several
buckets overlap with backward. Each rank's loss is the mean over its own batch; after several SGD
steps every replica's parameters equal those of one process that took the concatenated batches
(to 1e-6). Plain DDP (averaging) on the same unequal batches does not — the control that shows
the test can fail.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import torch

STEPS: dict[int, list[tuple[int, ...]]] = {2: [(3, 9), (10, 2), (1, 11)], 3: [(2, 5, 9), (8, 1, 7), (4, 4, 8)]}


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.Tanh(), torch.nn.Conv2d(4, 4, 3), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 5),
    ).double()


def _data(total: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(total, 1, 8, 8, generator=g, dtype=torch.float64), torch.randint(0, 5, (total,), generator=g)


@functools.cache
def _reference(world: int) -> list[torch.Tensor]:
    """One process, the concatenated batch of every step (computed once per world: the tests only read it)."""
    net = _net()
    opt = torch.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
    x, y = _data(sum(sum(s) for s in STEPS[world]))
    pos = 0
    for step in STEPS[world]:
        b = sum(step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x[pos:pos + b]), y[pos:pos + b]).backward()
        opt.step()
        pos += b
    return [p.detach().clone() for p in net.parameters()]


def _train(rank: int, world: int, group: object, weighted: bool) -> list[list[float]]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    from lbsim.runtime.ddp import LoadBalancer

    model = DDP(_net(), bucket_cap_mb=0.001, process_group=group)  # ~1 KB buckets: several per backward
    lb = LoadBalancer(global_batch=sum(STEPS[world][0]), variant="cpu", predictor="last", group=group)
    if weighted:
        lb.attach(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    x, y = _data(sum(sum(s) for s in STEPS[world]))
    pos = 0
    for step in STEPS[world]:
        lb.begin_step(step)
        lo = pos + sum(step[:rank])
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[lo:lo + step[rank]]), y[lo:lo + step[rank]]).backward()
        opt.step()
        pos += sum(step)
    return [p.detach().flatten().tolist() for p in model.parameters()]


def _rank(rank: int, rendezvous: str, out: str) -> None:
    """One 3-rank job: the 3-rank group and a 2-rank subgroup, each weighted and plain."""
    import torch.distributed as dist

    from lbsim.runtime.ddp import end_group

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=3)
    results = {}
    for world in (2, 3):
        group = dist.new_group(list(range(world)))  # every rank takes part in creating it
        for weighted in (True, False):
            if rank < world:
                results[f"{world}_{weighted}"] = _train(rank, world, group, weighted)
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    end_group()  # _train's DDP models freed while the groups are registered, a barrier, then the groups


@pytest.fixture(scope="module")
def trained(ddp3: dict[str, Path]) -> dict[str, list[list[float]]]:
    """The job's output, from the 3 ranks the DDP modules share (conftest.ddp3)."""
    return json.loads(ddp3[__name__].read_text())  # type: ignore[no-any-return]


def _worst(trained: dict[str, list[list[float]]], world: int, weighted: bool) -> float:
    ref = _reference(world)
    got = trained[f"{world}_{weighted}"]
    return max(float((torch.tensor(g, dtype=torch.float64) - r.flatten()).abs().max()) for g, r in zip(got, ref, strict=True))


@pytest.mark.parametrize("world", [2, 3])
def test_weighted_hook_equals_concatenated_batch(world: int, trained: dict[str, list[list[float]]]) -> None:
    assert _worst(trained, world, True) < 1e-6


@pytest.mark.parametrize("world", [2, 3])
def test_plain_ddp_averaging_differs_on_unequal_batches(world: int, trained: dict[str, list[list[float]]]) -> None:
    assert _worst(trained, world, False) > 1e-3
