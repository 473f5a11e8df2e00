"""A small CNN on the bundled 8x8 digits, trained with DDP under ``torchrun`` — plain or with LB-BSP.

    torchrun --nproc-per-node=3 examples/ddp_digits.py --mode lbbsp --slow-rank 2 --slowdown 3
    torchrun --nproc-per-node=3 examples/ddp_digits.py --mode ddp   --slow-rank 2 --slowdown 3

(with the repository on ``PYTHONPATH``). On GPUs it runs NCCL when each rank has a GPU of its own, and
gloo with CUDA tensors when ranks share one (``--device cuda --backend gloo``: computation and the
CUDA-event step clock on the GPU, collectives through host memory). ``--mode ddp`` is an ordinary DDP script: a
``DistributedSampler`` and ``B / n`` samples per rank, DDP's averaging. ``--mode lbbsp`` is the same
script with the lines marked ``# LB-BSP`` (docs/library.md shows them as a diff): per-rank batches
decided by lbsim's ``lbbsp`` scheme, gradients weighted by ``b_r / B``. The data are
:func:`lbsim.numerics.datasets.load_dataset` ``("digits")`` (shipped with lbsim: no download).

``--slow-rank R --slowdown F`` slows rank R by F for the whole run with the runtime's emulated
contention (:mod:`lbsim.runtime.ddp.inject`), in both modes alike; ``--slow-trace FILE`` instead slows
each rank as the rows of a ``time_s,worker,slowdown`` trace say (lbsim's ``simple`` trace format,
seconds since the ranks' common start: a straggler that moves, a replayed trace).
``--record DIR`` records the job (every rank's batch, compute and step moments, :mod:`lbsim.runtime.ddp.recorder`)
for ``lbsim whatif DIR`` (docs/whatif.md): in ``--mode ddp`` the plain script is only observed. Rank 0 prints one JSON line per epoch
(``epoch``, ``epoch_s``, ``samples_per_s``, ``test_accuracy``, ``batches``: the mean batch per rank,
``overhead_s`` / ``overhead_cpu_s``: rank 0's wall / CPU time in LB-BSP's balancer, ``recorder_s``: rank 0's
wall time in the recorder's calls, ``steps``) and writes them to ``--json`` if given.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from lbsim.contention.model import WorkerContention
from lbsim.contention.sources import StepSource
from lbsim.contention.traces import load_simple
from lbsim.numerics.datasets import load_dataset
from lbsim.runtime.ddp import LoadBalancer, Recorder, SlowedRank, constant_slowdown, end_group, slowed_hook  # LB-BSP


class Net(torch.nn.Module):
    """Two convolutions, a pooling and two linear layers: 1x8x8 -> 10 classes (GroupNorm, not BatchNorm:
    batch statistics would differ with the ranks' unequal batches, see docs/library.md)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, padding=1)
        self.norm = torch.nn.GroupNorm(4, 32)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = torch.nn.Linear(64 * 4 * 4, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.norm(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["ddp", "lbbsp"], default="lbbsp")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--global-batch", type=int, default=96)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variant", default="cpu", help="LB-BSP variant: auto, cpu, gpu, gpu_model")
    p.add_argument("--predictor", default="ema", help="cpu variant's speed predictor: narx, ema, last")
    p.add_argument("--ema-alpha", type=float, default=None, help="ema predictor: weight of the newest speed (default 0.5)")
    p.add_argument("--dead-band", type=float, default=None,
                   help="LB-BSP split_dead_band: skip re-splits gaining less than this share of the step (library default 0.1)")
    p.add_argument("--decide-every", type=int, default=4, help="LB-BSP: steps per observation window and decision (library default 4)")
    p.add_argument("--lag", type=int, default=2, choices=[0, 2], help="LB-BSP: 2 (decisions in flight) or 0 (decided before the next step)")
    p.add_argument("--drop-last", action="store_true",
                   help="LB-BSP: skip the epoch's last N mod B samples, as the DDP mode's DistributedSampler(drop_last=True)")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slowdown", type=float, default=3.0)
    p.add_argument("--slow-trace", type=Path, default=None,
                   help="a time_s,worker,slowdown CSV: each rank slowed as its rows say (instead of --slow-rank)")
    p.add_argument("--record", type=Path, default=None, help="record the job into this folder (for lbsim whatif)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: cuda when a GPU is visible, else cpu")
    p.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto",
                   help="auto: nccl when every rank has a GPU of its own, else gloo (ranks sharing a GPU need gloo)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world_env = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    own_gpu = cuda and torch.cuda.device_count() >= world_env
    backend = args.backend if args.backend != "auto" else ("nccl" if own_gpu else "gloo")
    device = torch.device("cuda", local_rank % torch.cuda.device_count()) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    comm_device = device if backend == "nccl" else torch.device("cpu")  # gloo gathers host tensors only

    data = load_dataset("digits")
    train = TensorDataset(torch.tensor(data.X_train, dtype=torch.float32).reshape(-1, 1, 8, 8),
                          torch.tensor(data.y_train, dtype=torch.int64))
    x_test = torch.tensor(data.X_test, dtype=torch.float32).reshape(-1, 1, 8, 8).to(device)
    y_test = torch.tensor(data.y_test, dtype=torch.int64).to(device)

    torch.manual_seed(args.seed)
    model = DDP(Net().to(device), device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    slowed = None
    if args.slow_trace is not None:
        mine = load_simple(args.slow_trace).get(rank)
        if mine is not None:
            slowed = SlowedRank(WorkerContention(compute=[StepSource([float(t) for t in mine[0]], [float(f) for f in mine[1]])]))
    elif rank == args.slow_rank:
        slowed = SlowedRank(constant_slowdown(args.slowdown))

    lb = None
    if args.mode == "lbbsp":
        options = {k: v for k, v in (("ema_alpha", args.ema_alpha), ("split_dead_band", args.dead_band)) if v is not None}
        lb = LoadBalancer(args.global_batch, variant=args.variant, predictor=args.predictor, seed=args.seed,  # LB-BSP
                          decide_every=args.decide_every, lag=args.lag, slowed=slowed, device=device, **options)
        lb.attach(model)  # LB-BSP: g = sum_r (b_r / B) g_r
        sampler = lb.sampler(len(train), seed=args.seed, drop_last=args.drop_last)  # LB-BSP
        loader = DataLoader(train, batch_sampler=sampler)  # LB-BSP
    else:
        sampler = DistributedSampler(train, seed=args.seed, drop_last=True)
        loader = DataLoader(train, batch_size=args.global_batch // world, sampler=sampler, drop_last=True)
    recorder = None
    if args.record is not None:  # the recorder's barrier is the common start of its clock and of the slowdown's
        grad_bytes = sum(q.numel() * q.element_size() for q in model.parameters())
        recorder = Recorder(args.record, balancer=lb, global_batch=args.global_batch, gradient_bytes=grad_bytes)
    else:
        dist.barrier()
    if slowed is not None:
        slowed.restart()
    if lb is None:
        hook = recorder.wrap(default_hooks.allreduce_hook) if recorder is not None else default_hooks.allreduce_hook
        model.register_comm_hook(None, slowed_hook(hook, slowed))  # DDP's mean, + slowdown (+ the recorder's mark)

    lines = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        dist.barrier()
        start = time.perf_counter()
        overhead0 = lb.overhead_s if lb is not None else 0.0
        cpu0 = lb.overhead_cpu_s if lb is not None else 0.0
        rec0 = recorder.cost_s if recorder is not None else 0.0
        samples, sizes = 0, []
        for x, y in loader:
            if lb is None and slowed is not None:
                slowed.begin()
            if recorder is not None:
                recorder.begin(len(y))
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()  # mean over this rank's batch
            if recorder is not None:
                recorder.synced()
            opt.step()
            if recorder is not None:
                recorder.end()
            samples += len(y)
            sizes.append(len(y))
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        epoch_s = time.perf_counter() - start
        counts = torch.tensor([float(samples), sum(sizes) / max(1, len(sizes))], dtype=torch.float64, device=comm_device)
        gathered = [torch.empty_like(counts) for _ in range(world)]
        dist.all_gather(gathered, counts)
        model.eval()
        with torch.no_grad():
            accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
        if rank == 0:
            total = sum(float(g[0]) for g in gathered)
            line = {"mode": args.mode, "epoch": epoch, "epoch_s": round(epoch_s, 4), "samples": int(total),
                    "samples_per_s": round(total / epoch_s, 2), "test_accuracy": round(accuracy, 4),
                    "batches": [round(float(g[1]), 2) for g in gathered],
                    "overhead_s": round((lb.overhead_s if lb is not None else 0.0) - overhead0, 5),
                    "overhead_cpu_s": round((lb.overhead_cpu_s if lb is not None else 0.0) - cpu0, 5),
                    "recorder_s": round((recorder.cost_s if recorder is not None else 0.0) - rec0, 6),
                    "steps": len(sizes), "device": str(device), "backend": backend}
            lines.append(line)
            print(json.dumps(line), flush=True)
    if rank == 0 and args.json is not None:
        args.json.write_text("".join(json.dumps(line) + "\n" for line in lines))
    if recorder is not None:
        recorder.close()
    if lb is not None:
        lb.finish()  # LB-BSP: its collectives still in flight
    del model  # then the group: a DDP model's Reducer must not be what frees it (docs/library.md, "Ending the job")
    end_group()


if __name__ == "__main__":
    main()
