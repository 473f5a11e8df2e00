"""The cost of LB-BSP's CUDA-event step clock (:class:`lbsim.runtime.ddp.StepClock`) per training step.

Run on a GPU machine: ``python benchmarks/bench_cuda_clock.py [--steps 200] [--pairs 10]`` (prints
JSON), or ``python -m pytest benchmarks/bench_cuda_clock.py --benchmark-only -s`` (skipped without a
GPU). Never asserted.

What the balancer adds to a step on CUDA: ``start()`` records one event, each gradient bucket's
``mark()`` records one more, ``lap()`` ends the step, and reading a lap synchronises on its last
event. The benchmark trains a model (the DDP example's digits CNN, or a wider MLP: ``--model mlp``)
for ``--steps`` steps on one GPU, in three arms run in rotating order each round: ``plain``;
``per_step`` — every step's lap read at once (the balancer before this benchmark: one host-GPU
synchronisation per step); ``per_window`` — the laps read once per ``--decide-every`` steps (the
balancer now). ``--buckets`` marks per step. Each arm's wall time is taken after a final
``torch.cuda.synchronize``; the figure is each timed arm's per-step difference to ``plain`` in the
same round (µs) and its ratio, median and range over rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]


def _model(kind: str, device: torch.device) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    if kind == "cnn":
        sys.path.insert(0, str(REPO / "examples"))
        from ddp_digits import Net  # the example's network

        model: torch.nn.Module = Net()
        x = torch.randn(256, 1, 8, 8)
    else:
        model = torch.nn.Sequential(torch.nn.Linear(64, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10))
        x = torch.randn(1024, 64)
    y = torch.randint(0, 10, (x.shape[0],))
    return model.to(device), x.to(device), y.to(device)


def _arm(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, opt: torch.optim.Optimizer, steps: int,
         clock: Any, buckets: int, read_every: int) -> float:
    """Seconds per step over ``steps`` steps (``clock`` None: plain; laps read every ``read_every`` steps)."""
    device = x.device
    laps: list[Any] = []
    torch.cuda.synchronize(device)
    t = time.perf_counter()
    for k in range(steps):
        if clock is not None:
            clock.start()
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        if clock is not None:
            for _ in range(buckets):
                clock.mark()
        opt.step()
        if clock is not None:
            laps.append(clock.lap())
            if (k + 1) % read_every == 0:
                sum(lap.seconds() for lap in laps)
                laps = []
    torch.cuda.synchronize(device)
    return (time.perf_counter() - t) / steps


def measure(model_kind: str = "cnn", steps: int = 200, pairs: int = 10, buckets: int = 2, decide_every: int = 4) -> dict[str, Any]:
    from lbsim.runtime.ddp import StepClock

    device = torch.device("cuda", 0)
    model, x, y = _model(model_kind, device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    clock = StepClock(device)
    arms = {"plain": (None, 1), "per_step": (clock, 1), "per_window": (clock, decide_every)}
    _arm(model, x, y, opt, 20, clock, buckets, 1)  # warm-up: kernels, allocator, events
    times: dict[str, list[float]] = {a: [] for a in arms}
    names = list(arms)
    for i in range(pairs):
        for a in names[i % 3:] + names[:i % 3]:  # rotate the order round by round
            c, every = arms[a]
            times[a].append(_arm(model, x, y, opt, steps, c, buckets, every))
    out: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(device), "torch": torch.__version__, "cuda": torch.version.cuda,
        "model": model_kind, "steps_per_arm": steps, "rounds": pairs, "marks_per_step": buckets, "decide_every": decide_every,
        "plain_step_ms_median": round(statistics.median(times["plain"]) * 1e3, 4),
    }
    for a in ("per_step", "per_window"):
        diff_us = [(b - p) * 1e6 for p, b in zip(times["plain"], times[a], strict=True)]
        ratio = [b / p for p, b in zip(times["plain"], times[a], strict=True)]
        out[a] = {"cost_us_per_step": {"median": round(statistics.median(diff_us), 2), "min": round(min(diff_us), 2),
                                       "max": round(max(diff_us), 2)},
                  "ratio_to_plain": {"median": round(statistics.median(ratio), 4), "min": round(min(ratio), 4),
                                     "max": round(max(ratio), 4)}}
    return out


def test_cuda_clock_cost(benchmark: Any) -> None:  # pragma: no cover - GPU machines only
    import pytest

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    result = benchmark.pedantic(measure, kwargs={"pairs": 4}, rounds=1, iterations=1)
    print(json.dumps(result))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--pairs", type=int, default=10, help="rounds (each runs the three arms once)")
    p.add_argument("--buckets", type=int, default=2)
    p.add_argument("--decide-every", type=int, default=4)
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_cuda_clock: no CUDA GPU")
    print(json.dumps(measure(a.model, a.steps, a.pairs, a.buckets, a.decide_every)))
