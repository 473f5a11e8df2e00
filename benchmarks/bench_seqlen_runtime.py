"""Mixed hardware plus sequence lengths, for real (gloo, 4 CPU ranks) and in the simulator.

Run: ``python benchmarks/bench_seqlen_runtime.py [--steps 14] [--world 4] [--slow-ranks 2] [--repeats 1]
[--out runs/seqlen_runtime.json]``.

A small length-sensitive model — one self-attention block (d = 48) over each sample's own token
sequence, a next-token head, per-sample token-mean loss, float32, one thread per rank — trains on
synthetic token sequences whose lengths are the shipped Azure conversation lengths
(data/token_lengths/azure_conv_2023.csv) divided by ``SCALE`` and capped at ``CAP`` tokens. The last
``--slow-ranks`` of the ``--world`` ranks (by default ranks 2 and 3 of 4) are slowed ``SLOWDOWN`` x for
the whole run (the library's emulated contention, :mod:`lbsim.runtime.ddp.inject`): fast and slow
"GPUs". Three arms, the same samples in the same order (the epoch permutation of seed 0), ``--steps``
steps of global batch ``B`` (``--batch``, default 32), run ``--repeats`` times with the arms' order rotated each repeat (so no
arm always runs first or last on a machine whose load drifts):

* ``bucketing``: each step's samples sorted by length, B/world consecutive ones per rank, plain DDP;
* ``lbbsp count``: :class:`lbsim.runtime.ddp.LoadBalancer` (gpu_model, lag 0, a decision per step);
* ``lbbsp cost``: the same with ``lengths=`` (the step's samples partitioned by predicted cost).

Figures: each arm's mean step time over steps 3.. (the first ones warm up and let the fits learn),
its median and range over the repeats, and the simulator's prediction of it. The simulator's figures are fitted here, inside the job before the arms run
(every rank at once, so the fit sees the processor sharing the arms see), by code in this file: the
per-sample cost ``c(L) = c0 + a L + b L^2`` (least squares over timed single samples at 8 lengths,
averaged over the ranks), the fixed time of a step, and the all-reduce time of the model's gradient
over gloo (4 ranks); the simulator then runs ``scenarios``-style YAML built from
them (written beside the JSON output) for the three schemes. Timings on a shared machine move with
its load: the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as mp
from scipy.optimize import nnls

REPO = Path(__file__).resolve().parents[1]
LENGTHS_FILE = REPO / "data" / "token_lengths" / "azure_conv_2023.csv"
SCALE, CAP, D, V, SLOWDOWN = 8, 768, 48, 64, 2.5
N = 2000  # dataset size (samples drawn from the shipped lengths)
ARMS = ("bucketing", "lbbsp count", "lbbsp cost")


def dataset_lengths() -> np.ndarray:
    rows = np.loadtxt(LENGTHS_FILE, skiprows=1, dtype=np.int64)
    pick = np.random.default_rng(0).choice(rows, N)
    return np.clip(np.ceil(pick / SCALE), 2, CAP).astype(np.int64)


class Block(torch.nn.Module):
    """Embedding, one single-head self-attention block with an MLP, a next-token head."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(V, D)
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.proj = torch.nn.Linear(D, D)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(D, 2 * D), torch.nn.GELU(), torch.nn.Linear(2 * D, D))
        self.head = torch.nn.Linear(D, V)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        att = torch.softmax(q @ k.T / math.sqrt(D), dim=-1)
        h = h + self.proj(att @ v)
        h = h + self.mlp(h)
        return self.head(h)


def tokens(i: int, length: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(10_000 + i)
    return torch.randint(0, V, (length,), generator=g)


def loss_of(model: torch.nn.Module, samples: list[int], lengths: np.ndarray) -> torch.Tensor:
    """Mean over the samples of each sample's token-mean next-token loss (a per-sample mean)."""
    total = torch.zeros(())
    for i in samples:
        x = tokens(i, int(lengths[i]))
        total = total + torch.nn.functional.cross_entropy(model(x[:-1]), x[1:])
    return total / max(len(samples), 1)


def fit_sample_cost() -> dict[str, float]:
    """c(L) = c0 + a L + b L^2 in seconds (forward + backward of one sample), and the step's fixed time.

    Timed inside the job, on every rank at once, so the fit sees the processor sharing the arms see."""
    torch.manual_seed(0)
    model = Block()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    grid = [8, 32, 64, 128, 256, 384, 512, 768]
    xs, ts = [], []
    for rep in range(4):
        for L in grid:
            x = tokens(rep, L)
            t = time.perf_counter()
            torch.nn.functional.cross_entropy(model(x[:-1]), x[1:]).backward()
            dt = time.perf_counter() - t
            if rep:  # the first pass warms up
                xs.append(L - 1)
                ts.append(dt)
    X = np.array(xs, dtype=np.float64)
    # non-negative least squares: a cost term cannot be negative, and clipping an unconstrained fit's
    # negative term afterwards would leave the others fitted for it (biased low in mid-range lengths)
    c0, a, b = nnls(np.stack([np.ones_like(X), X, X * X], 1), np.array(ts))[0]
    fixed = []
    for _ in range(20):
        t = time.perf_counter()
        opt.step()
        opt.zero_grad()
        fixed.append(time.perf_counter() - t)
    return {"c0": max(float(c0), 0.0), "a": max(float(a), 1e-12), "b": max(float(b), 0.0),
            "t0_s": float(np.median(fixed)), "params": sum(p.numel() for p in model.parameters())}


def shared_fit(fits: list[dict[str, float]], ref: float) -> dict[str, float]:
    """One c(L) for every rank (the units must agree across ranks): the ranks' coefficients averaged."""
    out = {k: float(np.mean([f[k] for f in fits])) for k in ("c0", "a", "b", "t0_s")}
    out["params"] = fits[0]["params"]
    out["ref"] = ref
    return out


def _rank(rank: int, rendezvous: str, out: str, steps: int, world: int, slow_ranks: int, repeats: int,
          B: int) -> None:  # noqa: N803 (the global batch's name in the docs)
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    from lbsim.runtime.ddp import LoadBalancer, SlowedRank, constant_slowdown, slowed_hook

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    lengths = dataset_lengths()
    fits: list[dict[str, float]] = [None] * world  # type: ignore[list-item]
    dist.all_gather_object(fits, fit_sample_cost())
    cfg = shared_fit(fits, float(lengths.mean()))
    speed = 1.0 / (cfg["c0"] + cfg["a"] * cfg["ref"] + cfg["b"] * cfg["ref"] ** 2)  # samples/s at L_ref
    slow = rank >= world - slow_ranks
    nominal = speed / SLOWDOWN if slow else speed
    # the all-reduce of the gradient, timed alone (the simulator's communication figure)
    grad = torch.zeros(int(cfg["params"]))
    comm = []
    for _ in range(12):
        dist.barrier()
        t = time.perf_counter()
        dist.all_reduce(grad)
        comm.append(time.perf_counter() - t)
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(0)).tolist()
    result: dict[str, Any] = {"comm_s": float(np.median(comm[2:])), "fit": cfg, "rank_fits": fits,
                                 "world": world, "slow_ranks": slow_ranks, "repeats": repeats}
    order = [ARMS[(i + r) % len(ARMS)] for r in range(repeats) for i in range(len(ARMS))]  # rotated each repeat
    for arm in order:
        torch.manual_seed(0)
        slowed = SlowedRank(constant_slowdown(SLOWDOWN)) if slow else None
        model = DDP(Block())
        lb = None
        if arm == "bucketing":
            model.register_comm_hook(None, slowed_hook(default_hooks.allreduce_hook, slowed))
        else:
            extra: dict[str, Any] = {"lengths": torch.tensor(lengths), "cost_linear": cfg["a"], "cost_quadratic": cfg["b"],
                     "cost_per_sample": cfg["c0"], "reference_tokens": cfg["ref"]} if arm == "lbbsp cost" else {}
            lb = LoadBalancer(B, variant="gpu_model", samples_per_s=nominal, slowed=slowed, decide_every=1, lag=0,
                              max_batch=B, **extra)
            lb.attach(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        times, mine_counts = [], []
        for k in range(steps):
            step = perm[k * B:(k + 1) * B]
            dist.barrier()
            t = time.perf_counter()
            if lb is None:
                lo, hi = rank * B // world, (rank + 1) * B // world
                mine = sorted(step, key=lambda i: (int(lengths[i]), i))[lo:hi]
                if slowed is not None:
                    slowed.begin()
            elif lb.costs is None:
                batches = lb.next_batches()
                lb.begin_step(batches)
                lo = sum(batches[:rank])
                mine = step[lo:lo + batches[rank]]
            else:
                lb.next_batches()
                owner, samples = lb.assign(step)
                lb.begin_cost_step(owner, samples)
                mine = [i for i, o in zip(step, owner.tolist(), strict=True) if o == rank]
            opt.zero_grad()
            loss_of(model, mine, lengths).backward()
            opt.step()
            times.append(time.perf_counter() - t)
            mine_counts.append(len(mine))
        if lb is not None:
            lb.finish()
        every = [None] * world
        dist.all_gather_object(every, {"times": times, "counts": mine_counts})
        result.setdefault(arm, []).append(every)
    if rank == 0:
        Path(out).write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


def simulate(fit: dict[str, float], comm_s: float, steps: int, folder: Path, world: int, slow_ranks: int,
             B: int) -> dict[str, float]:  # noqa: N803
    """The simulator's mean iteration time of each arm, from the fitted figures."""
    import yaml

    import lbsim

    lengths = dataset_lengths()
    lfile = folder / "lengths.csv"
    lfile.write_text("tokens\n" + "\n".join(str(int(v)) for v in lengths) + "\n")
    speed = 1.0 / (fit["c0"] + fit["a"] * fit["ref"] + fit["b"] * fit["ref"] ** 2)
    grad_bytes = int(fit["params"]) * 4
    bw_gbps = 2 * (world - 1) / world * grad_bytes * 8 / comm_s / 1e9  # the flat ring's time = the measured all-reduce
    group = {"instance": "c5.xlarge", "t0_s": fit["t0_s"], "max_batch": B}
    scenario = {
        "name": "seqlen_runtime", "seed": 0,
        "workload": {"model": "resnet50_imagenet", "global_batch": B, "updates": steps, "gradient_bytes": grad_bytes,
                     "sample_cost": {"lengths": {"name": "file", "path": str(lfile.resolve())}, "cost_linear": fit["a"],
                                     "cost_quadratic": fit["b"], "cost_per_sample": fit["c0"],
                                     "reference_tokens": fit["ref"]}},
        "cluster": {"groups": [{**group, "count": world - slow_ranks, "samples_per_s": speed},
                               {**group, "count": slow_ranks, "samples_per_s": speed / SLOWDOWN}]},
        "network": {"name": "ring_allreduce", "alpha_s": 0.0, "bandwidth_gbps": bw_gbps},
        "scheme": {"name": "lbbsp", "variant": "gpu_model", "split_dead_band": 0.1},
    }
    path = folder / "seqlen_runtime.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    out = {}
    for arm, scheme, over in (("bucketing", "bucketing", {}), ("lbbsp count", None, {}),
                              ("lbbsp cost", None, {"scheme.balance": "cost"})):
        run = lbsim.simulate(path, scheme=scheme, overrides=over)
        it = run.iterations
        per_round = it.groupby("update")["end_s"].max() - it.groupby("update")["start_s"].min()
        out[arm] = float(per_round.iloc[2:].mean())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=14)
    ap.add_argument("--world", type=int, default=4, help="gloo ranks (3-4: the issue's runtime check)")
    ap.add_argument("--slow-ranks", type=int, default=None, help=f"the last ranks slowed {SLOWDOWN}x (default: half)")
    ap.add_argument("--repeats", type=int, default=1, help="each arm this many times, the arms' order rotated")
    ap.add_argument("--batch", type=int, default=32, help="global batch B (samples per step, all ranks)")
    ap.add_argument("--out", default="runs/seqlen_runtime.json")
    args = ap.parse_args()
    slow_ranks = args.world // 2 if args.slow_ranks is None else args.slow_ranks
    if not (2 <= args.world <= 8 and 1 <= slow_ranks < args.world and 1 <= args.repeats <= 20 and 3 <= args.steps <= 60
            and args.world <= args.batch <= 256 and args.steps * args.batch <= N):
        ap.error(f"expected 2 <= --world <= 8, 1 <= --slow-ranks < --world, 1 <= --repeats <= 20, 3 <= --steps <= 60, "
                 f"--world <= --batch <= 256 and --steps x --batch <= {N} (the dataset)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(_rank, args=(str(Path(tmp) / "rendezvous"), str(out), args.steps, args.world, slow_ranks,
                                        args.repeats, args.batch), nprocs=args.world, start_method="spawn")
    real = json.loads(out.read_text())
    fit = real["fit"]
    sim = simulate(fit, real["comm_s"], args.steps, out.parent, args.world, slow_ranks, args.batch)
    print(f"fit: c(L) = {fit['c0'] * 1e3:.3f} ms + {fit['a'] * 1e6:.3f} us L + {fit['b'] * 1e9:.3f} ns L^2; "
          f"step fixed {fit['t0_s'] * 1e3:.2f} ms; all-reduce {real['comm_s'] * 1e3:.2f} ms; L_ref {fit['ref']:.1f}")
    rows = {}
    print(f"{args.world} ranks, the last {slow_ranks} slowed {SLOWDOWN}x; global batch {args.batch}; "
          f"{args.repeats} repeat(s), arms rotated")
    for arm in ARMS:
        means = []
        for per_rank in real[arm]:  # one repeat
            steps = np.max(np.array([r["times"] for r in per_rank]), axis=0)  # a step ends when its slowest rank's does
            means.append(float(steps[2:].mean()))
        mean = float(np.median(means))
        counts = np.array([r["counts"] for r in real[arm][0]])[:, 2:].mean(axis=1)
        rows[arm] = {"runtime_s": mean, "runtime_repeats_s": means, "sim_s": sim[arm], "error": sim[arm] / mean - 1,
                     "mean_counts": counts.tolist()}
        print(f"{arm:12s} runtime {mean:.3f} s (median; {min(means):.3f}..{max(means):.3f})  simulator {sim[arm]:.3f} s  "
              f"error {sim[arm] / mean - 1:+.1%}  mean samples per rank {np.round(counts, 1).tolist()}")
    load1 = os.getloadavg()
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f}")
    out.write_text(json.dumps({"fit": fit, "rows": rows, "load": [load0[0], load1[0]], "raw": real}))


if __name__ == "__main__":
    main()
