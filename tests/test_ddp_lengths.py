"""The DDP library with per-sample lengths (LoadBalancer(lengths=...)): 3 gloo ranks of unequal speed.

Every sample of an epoch is handed to exactly one rank once, each step's samples are the global
batch, the ranks' partitions agree, and the batch- or token-weighted gradient equals one process
training on the concatenated batch (1e-6) with unequal sample counts and lengths per rank.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

N, B, V = 45, 12, 7
SPEEDS = (1.0, 2.0, 4.0)  # samples per second at the reference length: unequal shares


def _lengths() -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    return torch.randint(1, 40, (N,), generator=g)


def _tokens(i: int, length: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 + i)
    return torch.randint(0, V, (length,), generator=g)


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(V, 5), torch.nn.Tanh(), torch.nn.Linear(5, V)).double()


def _loss(net: torch.nn.Module, samples: list[int], lengths: torch.Tensor, per_token: bool) -> torch.Tensor:
    """Per-token mean over the samples' tokens, or the mean over samples of each sample's token mean."""
    losses = []
    for i in samples:
        x = _tokens(i, int(lengths[i]))
        per = torch.nn.functional.cross_entropy(net(x), (x * 3 + 1) % V, reduction="none")
        losses.append(per.sum() if per_token else per.mean())
    total = torch.stack(losses).sum()
    return total / (int(lengths[samples].sum()) if per_token else len(samples))


def _reference(steps: list[list[int]], per_token: bool) -> list[list[float]]:
    net = _net()
    opt = torch.optim.SGD(net.parameters(), lr=0.3, momentum=0.9)
    for samples in steps:
        opt.zero_grad()
        _loss(net, samples, _lengths(), per_token).backward()
        opt.step()
    return [p.detach().flatten().tolist() for p in net.parameters()]


def _rank(rank: int, rendezvous: str, out: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from lbsim.runtime.ddp import LoadBalancer, end_group

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=3)
    lengths = _lengths()
    results: dict[str, object] = {}
    for mean in ("per_token", "per_sample"):
        model = DDP(_net())
        lb = LoadBalancer(B, variant="gpu_model", samples_per_s=SPEEDS[rank], lengths=lengths, cost_quadratic=0.02,
                          gradient_mean=mean, decide_every=1)
        lb.attach(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9)
        sampler = lb.sampler(N, seed=5)
        mine: list[list[int]] = []
        for samples in sampler:
            mine.append(samples)
            opt.zero_grad()
            _loss(model, samples, lengths, mean == "per_token").backward()
            opt.step()
        lb.finish()
        every: list[list[list[int]]] = [None] * 3  # type: ignore[list-item]
        dist.all_gather_object(every, mine)
        results[mean] = {"steps": every, "params": [p.detach().flatten().tolist() for p in model.parameters()],
                         "history": [list(h) for h in lb.history]}
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    del model  # its Reducer must not be what frees the group (lbsim.runtime.ddp.teardown)
    end_group()


@pytest.fixture(scope="module")
def runs(ddp3: dict[str, Path]) -> dict:
    """The job's output, from the 3 ranks the DDP modules share (conftest.ddp3)."""
    return json.loads(ddp3[__name__].read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("mean", ["per_token", "per_sample"])
def test_every_sample_of_the_epoch_once_and_each_step_the_global_batch(runs: dict, mean: str) -> None:
    per_rank = runs[mean]["steps"]
    seen = [i for rank in per_rank for step in rank for i in step]
    assert sorted(seen) == list(range(N))  # once each, none missing
    steps = len(per_rank[0])
    sizes = [sum(len(per_rank[r][k]) for r in range(3)) for k in range(steps)]
    assert sizes == [B] * (N // B - 1) + [B + N % B] or sizes == [B] * (N // B) + [N % B]
    counts = [tuple(len(per_rank[r][k]) for r in range(3)) for k in range(steps)]
    assert [tuple(h) for h in runs[mean]["history"]] == counts
    assert len(set(counts)) > 1 and any(len(set(c)) > 1 for c in counts)  # unequal shares that change


@pytest.mark.parametrize("mean", ["per_token", "per_sample"])
def test_weighted_gradient_equals_one_process_on_the_concatenated_batch(runs: dict, mean: str) -> None:
    per_rank = runs[mean]["steps"]
    steps = [[i for r in range(3) for i in per_rank[r][k]] for k in range(len(per_rank[0]))]
    ref = _reference(steps, mean == "per_token")
    got = runs[mean]["params"]
    worst = max(abs(g - r) for gp, rp in zip(got, ref, strict=True) for g, r in zip(gp, rp, strict=True))
    assert worst < 1e-6
    other = _reference(steps, mean != "per_token")  # the other mean is a different update: the test can fail
    assert max(abs(g - r) for gp, rp in zip(got, other, strict=True) for g, r in zip(gp, rp, strict=True)) > 1e-4
