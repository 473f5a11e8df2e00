"""LB-BSP in a DDP script under ``torchrun --nproc-per-node=3`` (gloo, CPU): throughput and overhead.

Run: ``python -m pytest benchmarks/bench_ddp.py --benchmark-only -s`` (measured, never asserted;
a few minutes) or ``python benchmarks/bench_ddp.py`` (prints the table). The script is
``examples/ddp_digits.py`` (a small CNN on the bundled digits, global batch 192, 1 thread per
rank), run side by side in alternating order, ``REPEATS`` times per arm:

* ``contention``: rank 2 slowed by ``SLOWDOWN`` for the whole run with the runtime's emulated
  contention (:mod:`lbsim.runtime.ddp.inject`, the same in both arms). ``ddp``: the plain script
  (DistributedSampler, B/3 per rank, DDP's averaging); ``lbbsp``: the same script with LB-BSP
  (variant ``cpu``, predictor ``ema``, the library's defaults ``split_dead_band`` 0.1 and ``decide_every`` 4).
  Both arms drop the epoch's last ``N mod B`` samples (DistributedSampler's ``drop_last``; the
  LB-BSP sampler's ``drop_last``): the same 7 full steps of 192 samples per epoch, no short step.
  Figures: samples per second over epochs 1.. (epoch 0 is the warm-up in which LB-BSP learns the
  speeds), the ratio lbbsp/ddp per pair and its median, quartiles and range, the test accuracy
  after every epoch, the mean batch per rank, and the machine's load average before and after.
* ``overhead``: no slowdown. The ratio of sample rates (lbbsp/ddp: < 1 means LB-BSP is slower) and
  the share of the epoch's time rank 0's balancer spent (its bookkeeping, the decision, launching
  its asynchronous collective): wall (``overhead_s``, inflated when the OS schedules other
  processes meanwhile) and this thread's CPU time (``overhead_cpu_s``), also per step.

``python benchmarks/bench_ddp.py overhead --repeats 8 -- --dead-band 0``: 8 pairs, with any further
arguments after ``--`` passed to the LB-BSP arm's script (here: the scheme's rule without dead band;
``--decide-every 1``, ``--lag 0``, ``--ema-alpha 0.2`` likewise). Both arms share one machine; on a
loaded 2-core box the absolute figures move run to run, which is why arms alternate and the ratio
is taken within each pair.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EPOCHS = 5
REPEATS = 3
SLOWDOWN = 3.0
GLOBAL_BATCH = 192


def run_example(mode: str, *, slow_rank: int, epochs: int = EPOCHS, extra: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """One ``torchrun --nproc-per-node=3 examples/ddp_digits.py`` run; its per-epoch JSON lines."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "epochs.jsonl"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3",
               str(REPO / "examples" / "ddp_digits.py"), "--mode", mode, "--epochs", str(epochs),
               "--global-batch", str(GLOBAL_BATCH), "--slow-rank", str(slow_rank), "--slowdown", str(SLOWDOWN),
               "--variant", "cpu", "--predictor", "ema", "--drop-last", "--json", str(out),
               *(extra if mode == "lbbsp" else ())]
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        return [json.loads(line) for line in out.read_text().splitlines()]


def rate(lines: list[dict[str, Any]]) -> float:
    """Samples per second over epochs 1.. (epoch 0: warm-up)."""
    rest = lines[1:]
    return sum(e["samples"] for e in rest) / sum(e["epoch_s"] for e in rest)


def load_average() -> float:
    """The machine's 1-minute load average (what else is running: the arms share the machine)."""
    return os.getloadavg()[0]


def side_by_side(slow_rank: int, repeats: int = REPEATS, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    runs: dict[str, list[list[dict[str, Any]]]] = {"ddp": [], "lbbsp": []}
    load = [load_average()]
    for i in range(repeats):
        for mode in (("ddp", "lbbsp") if i % 2 == 0 else ("lbbsp", "ddp")):
            runs[mode].append(run_example(mode, slow_rank=slow_rank, extra=extra))
        load.append(load_average())
    ratios = [rate(b) / rate(a) for a, b in zip(runs["ddp"], runs["lbbsp"], strict=True)]
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    info: dict[str, Any] = {"lbbsp_over_ddp_samples_per_s": round(statistics.median(ratios), 3),
                            "ratio_quartiles": [round(q[0], 3), round(q[2], 3)],
                            "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
                            "ratios": [round(r, 3) for r in ratios], "lbbsp_args": list(extra),
                            "load_average_1min": [round(v, 2) for v in load]}
    for mode, rs in runs.items():
        info[f"{mode}_samples_per_s"] = [round(rate(r), 1) for r in rs]
        info[f"{mode}_accuracy_per_epoch"] = [[e["test_accuracy"] for e in r] for r in rs]
        info[f"{mode}_mean_batches_last_epoch"] = [r[-1]["batches"] for r in rs]
    lb = runs["lbbsp"]
    info["lbbsp_overhead_share"] = round(statistics.median(
        sum(e["overhead_s"] for e in r[1:]) / sum(e["epoch_s"] for e in r[1:]) for r in lb), 5)
    info["lbbsp_overhead_cpu_share"] = round(statistics.median(
        sum(e["overhead_cpu_s"] for e in r[1:]) / sum(e["epoch_s"] for e in r[1:]) for r in lb), 5)
    info["lbbsp_overhead_cpu_ms_per_step"] = round(statistics.median(
        1e3 * sum(e["overhead_cpu_s"] for e in r[1:]) / sum(e["steps"] for e in r[1:]) for r in lb), 4)
    info["ddp_step_ms"] = round(statistics.median(
        1e3 * sum(e["epoch_s"] for e in r[1:]) / sum(e["steps"] for e in r[1:]) for r in runs["ddp"]), 3)
    return info


def test_contention(benchmark) -> None:  # type: ignore[no-untyped-def]
    info = benchmark.pedantic(side_by_side, args=(2,), rounds=1, iterations=1)
    benchmark.extra_info.update(info)
    print(json.dumps(info))


def test_overhead(benchmark) -> None:  # type: ignore[no-untyped-def]
    info = benchmark.pedantic(side_by_side, args=(-1,), rounds=1, iterations=1)
    benchmark.extra_info.update(info)
    print(json.dumps(info))


if __name__ == "__main__":  # python benchmarks/bench_ddp.py [contention] [overhead] [--repeats N] [-- lbbsp args]
    args = sys.argv[1:]
    extra: tuple[str, ...] = ()
    if "--" in args:
        i = args.index("--")
        extra = tuple(args[i + 1:])
        del args[i:]
    repeats = REPEATS
    if "--repeats" in args:
        i = args.index("--repeats")
        repeats = int(args[i + 1])
        del args[i:i + 2]
    for name in args or ["contention", "overhead"]:
        print(name, json.dumps(side_by_side(2 if name == "contention" else -1, repeats, extra)), flush=True)
