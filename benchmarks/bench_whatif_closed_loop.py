"""Closed loop: predict LB-BSP's speedup on a recorded plain-DDP job with ``lbsim whatif``, then measure it.

Run: ``python benchmarks/bench_whatif_closed_loop.py`` (all patterns, ``REPEATS`` pairs each; prints
the table and writes ``--json``) or ``python -m pytest benchmarks/bench_whatif_closed_loop.py
--benchmark-only -s`` (measured, never asserted). The job is ``examples/ddp_digits.py`` under
``torchrun --nproc-per-node=3`` (gloo, CPU, 1 thread per rank, global batch 96, ``EPOCHS`` epochs of
14 full steps; ``REPEATS`` pairs per pattern, ``OVERHEAD_REPEATS`` for the overhead: 36 launches of three
ranks, 23 minutes on the busy 2-core development machine at load 10-21, where a launch costs ~35 s), slowed by the runtime's emulated contention (:mod:`lbsim.runtime.ddp.inject`) as a
``time_s,worker,slowdown`` schedule from the ranks' common start (``--slow-trace``), the same in
both arms. One pair:

1. **observe**: the plain DDP script (``--mode ddp``: equal batches, DDP's averaging) with
   ``--record`` (the recorder in observe mode);
2. **predict**: ``lbsim whatif`` on that recording: the predicted speedup of LB-BSP as the library
   runs it (``lbbsp_library``: variant cpu, predictor ema, split_dead_band 0.1) over the replayed job;
3. **realize**: the same script with LB-BSP (``--mode lbbsp --variant cpu --predictor ema
   --drop-last``: the same 14 steps of 96 samples per epoch, the library's defaults: a decision per 4
   steps, in flight), recorded too; the realized speedup is
   the ratio of the two recordings' sample rates (samples / job time, first batch to last
   optimizer step, measured the same way in both).

The arms alternate (observe first in even pairs, LB-BSP first in odd ones). Patterns:

* ``persistent``: rank 2 slowed 3x for the whole run;
* ``transient``: a 3x straggler that moves: rank ``j mod 3`` slowed during ``[1.2 j, 1.2 j + 0.8)`` s;
* ``pai``: Alibaba PAI job 4's per-worker mini-batch times (scenarios/traces/pai_job_4_norm.csv, CC BY
  4.0): ranks 0, 1, 2 replay trace workers 1, 4, 0 (a fast one, a mid one, a slow one), one trace
  iteration per ``PAI_STEP_S`` seconds, each factor over the fast worker's median, floored at 1 (an
  emulated slowdown cannot speed a rank up).

Diagnosis (not a prediction: it reads the realized run): a plain DDP job never varies its batch, so
its fixed per-step compute ``t0`` is invisible and whatif assumes 0 (``--t0-s`` gives it); each pair
also reports the ``t0`` the LB-BSP run's varied batches show and the prediction with it.

``ideal`` (not run by default): the persistent pattern's "no stragglers" replay against the plain script
without injection, alternated pairs of the two recorded runs (whatif's ideal from the slowed one).

``overhead``: the plain script without contention, with ``--record``; the recorder's own calls
(its hook mark, ``begin``/``synced``/``end`` and flushes: ``recorder_s`` of rank 0) as a share of the
epoch time, per epoch; and, pairs alternated with the same script unrecorded, the ratio of sample
rates (its spread shows what this machine can resolve).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lbsim.recording import read_recording  # noqa: E402

EPOCHS = 8
REPEATS = 5
OVERHEAD_REPEATS = 3
GLOBAL_BATCH = 96
PAI_WORKERS = (1, 4, 0)
PAI_STEP_S = 0.1
PATTERNS = ("persistent", "transient", "pai")


def pattern_trace(name: str, horizon_s: float = 60.0) -> str:
    """The pattern's ``time_s,worker,slowdown`` schedule (module docstring)."""
    rows = ["time_s,worker,slowdown"]
    if name == "persistent":
        rows.append("0,2,3")
    elif name == "transient":
        j = 0
        while 1.2 * j < horizon_s:
            rows += [f"{1.2 * j:.3f},{j % 3},3", f"{1.2 * j + 0.8:.3f},{j % 3},1"]
            j += 1
    elif name == "pai":
        import numpy as np

        from lbsim.contention.traces import load_pai_minibatch

        m = load_pai_minibatch(REPO / "scenarios" / "traces" / "pai_job_4_norm.csv")
        ref = float(np.median(m[PAI_WORKERS[0]]))
        steps = min(m.shape[1], int(horizon_s / PAI_STEP_S))
        for rank, w in enumerate(PAI_WORKERS):
            for i in range(steps):
                rows.append(f"{i * PAI_STEP_S:.3f},{rank},{max(1.0, float(m[w, i]) / ref):.4g}")
    else:
        raise ValueError(f"unknown pattern {name!r}: {', '.join(PATTERNS)}")
    return "\n".join(rows) + "\n"


LBBSP_ARGS: tuple[str, ...] = ()  # the library's defaults (decide_every 4, lag 2): per-step decisions cost more than they gain under load


def run_example(mode: str, *, record: Path | None, trace: Path | None, epochs: int = EPOCHS) -> list[dict[str, Any]]:
    """One ``torchrun --nproc-per-node=3 examples/ddp_digits.py`` run; its per-epoch JSON lines."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "epochs.jsonl"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3",
               str(REPO / "examples" / "ddp_digits.py"), "--mode", mode, "--epochs", str(epochs),
               "--global-batch", str(GLOBAL_BATCH), "--variant", "cpu", "--predictor", "ema", "--drop-last",
               "--json", str(out)]
        if record is not None:
            cmd += ["--record", str(record)]
        if trace is not None:
            cmd += ["--slow-trace", str(trace)]
        if mode == "lbbsp":
            cmd += list(LBBSP_ARGS)
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        return [json.loads(line) for line in out.read_text().splitlines()]


def recorded_rate(folder: Path) -> float:
    rec = read_recording(folder)
    return float(rec.samples.sum()) / rec.job_s


def predict(folder: Path, out: Path, t0_s: float | None = None) -> dict[str, float]:
    from lbsim.whatif.run import LIBRARY_LBBSP, whatif

    o = whatif(folder, out, schemes=["bsp", "lbbsp"], bootstrap=0, t0_s=t0_s)
    return {"predicted": o.row(LIBRARY_LBBSP).speedup.value, "replay_error": o.replay_error, "lost_share": o.lost_share,
            "ideal_s": o.ideal_s}


def fixed_cost_s(lb_folder: Path, obs_folder: Path) -> float:
    """Diagnosis, not prediction: the per-step fixed compute t0 the LB-BSP run's varied batches show
    (median over its ranks' fits), capped below the plain run's median compute."""
    import numpy as np

    from lbsim.whatif.fit import fit_recording

    t0s = [c.t0_s for c in fit_recording(read_recording(lb_folder)).rank_curves if c.varied]
    cap = 0.9 * float(np.median(read_recording(obs_folder).compute_s))
    return min(float(np.median(t0s)), cap) if t0s else 0.0


def load_average() -> float:
    return os.getloadavg()[0]


def spread(values: list[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4) if len(values) >= 2 else [values[0]] * 3
    return {"median": statistics.median(values), "q1": q[0], "q3": q[2], "min": min(values), "max": max(values)}


def closed_loop(pattern: str, repeats: int = REPEATS, epochs: int = EPOCHS, keep: Path | None = None) -> dict[str, Any]:
    pairs = []
    loads = [load_average()]
    with tempfile.TemporaryDirectory() as scratch:
        tmp = scratch if keep is None else str(keep / pattern)
        Path(tmp).mkdir(parents=True, exist_ok=True)
        trace = Path(tmp) / f"{pattern}.csv"
        trace.write_text(pattern_trace(pattern))
        for i in range(repeats):
            obs, lb = Path(tmp) / f"obs{i}", Path(tmp) / f"lb{i}"
            for mode in (("ddp", "lbbsp") if i % 2 == 0 else ("lbbsp", "ddp")):
                run_example(mode, record=obs if mode == "ddp" else lb, trace=trace, epochs=epochs)
            pairs.append(pair(obs, lb, Path(tmp), i))
            loads.append(load_average())
    return summarize(pattern, pairs, loads)


def pair(obs: Path, lb: Path, work: Path, i: int) -> dict[str, float]:
    """Predicted (from the plain run's recording) and realized (the two recordings' rates) speedup of one pair."""
    p = predict(obs, work / f"whatif{i}")
    realized = recorded_rate(lb) / recorded_rate(obs)
    t0 = fixed_cost_s(lb, obs)
    with_t0 = predict(obs, work / f"whatif_t0_{i}", t0)["predicted"]
    return {**p, "realized": realized, "error": p["predicted"] / realized - 1.0, "lb_t0_s": t0,
            "predicted_with_lb_t0": with_t0, "error_with_lb_t0": with_t0 / realized - 1.0}


def repredict(kept: Path, pattern: str, loads: list[float]) -> dict[str, Any]:
    """The pairs of a ``--keep`` folder predicted again by this lbsim (the recordings are the measurements)."""
    pairs = []
    for i in range(REPEATS * 20):
        obs, lb = kept / pattern / f"obs{i}", kept / pattern / f"lb{i}"
        if not (obs / "job.json").exists() or not (lb / "job.json").exists():
            break
        pairs.append(pair(obs, lb, kept / pattern, i))
    return summarize(pattern, pairs, loads)


def summarize(pattern: str, pairs: list[dict[str, float]], loads: list[float]) -> dict[str, Any]:
    return {"pattern": pattern, "pairs": pairs, "predicted": spread([p["predicted"] for p in pairs]),
            "realized": spread([p["realized"] for p in pairs]), "error": spread([p["error"] for p in pairs]),
            "replay_error": spread([p["replay_error"] for p in pairs]),
            "error_with_lb_t0": spread([p["error_with_lb_t0"] for p in pairs]), "lb_t0_s": spread([p["lb_t0_s"] for p in pairs]),
            "load": loads}


def ideal_check(repeats: int = REPEATS, epochs: int = EPOCHS, keep: Path | None = None) -> dict[str, Any]:
    """The persistent pattern's "no stragglers" replay against the plain script run without injection,
    in alternated pairs (the same machine load for both arms of a pair)."""
    from lbsim.whatif.run import whatif

    errors, loads = [], [load_average()]
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch if keep is None else str(keep / "ideal"))
        tmp.mkdir(parents=True, exist_ok=True)
        trace = tmp / "persistent.csv"
        trace.write_text(pattern_trace("persistent"))
        for i in range(repeats):
            for arm in (("slowed", "clean") if i % 2 == 0 else ("clean", "slowed")):
                run_example("ddp", record=tmp / f"{arm}{i}", trace=trace if arm == "slowed" else None, epochs=epochs)
            ideal = whatif(tmp / f"slowed{i}", tmp / f"whatif{i}", schemes=["bsp"], bootstrap=0).ideal_s
            errors.append(ideal / read_recording(tmp / f"clean{i}").job_s - 1.0)
            loads.append(load_average())
    return {"error": spread(errors), "errors": errors, "load": loads}


def overhead(repeats: int = OVERHEAD_REPEATS, epochs: int = EPOCHS, keep: Path | None = None) -> dict[str, Any]:
    shares, ratios, clean = [], [], []
    loads = [load_average()]
    with tempfile.TemporaryDirectory() as scratch:
        tmp = scratch if keep is None else str(keep / "overhead")
        Path(tmp).mkdir(parents=True, exist_ok=True)
        for i in range(repeats):
            rates = {}
            for arm in (("plain", "recorded") if i % 2 == 0 else ("recorded", "plain")):
                lines = run_example("ddp", record=Path(tmp) / f"rec{i}" if arm == "recorded" else None, trace=None,
                                    epochs=epochs)
                rates[arm] = sum(e["samples"] for e in lines[1:]) / sum(e["epoch_s"] for e in lines[1:])
                if arm == "recorded":
                    shares += [e["recorder_s"] / e["epoch_s"] for e in lines[1:]]
                    clean.append(read_recording(Path(tmp) / f"rec{i}").job_s)
            ratios.append(rates["recorded"] / rates["plain"])
            loads.append(load_average())
    return {"recorder_share": spread(shares), "rate_ratio": spread(ratios), "clean_job_s": spread(clean), "load": loads}


def _fmt(s: dict[str, float], pct: bool = False) -> str:
    f = (lambda v: f"{v:+.1%}") if pct else (lambda v: f"{v:.3f}")
    return f"{f(s['median'])} [{f(s['q1'])}, {f(s['q3'])}] ({f(s['min'])}..{f(s['max'])})"


def markdown(results: dict[str, Any]) -> str:
    """docs/whatif.md's closed-loop table from a run's results."""
    def cell(sp: dict[str, float], pct: bool = False) -> str:
        f = (lambda v: f"{v:+.1%}") if pct else (lambda v: f"{v:.2f}")
        return f"{f(sp['median'])} [{f(sp['q1'])}, {f(sp['q3'])}] ({f(sp['min'])}..{f(sp['max'])})"

    rows = ["| pattern | pairs | load (1 min) | replay vs recorded | predicted LB-BSP speedup | realized | predicted / realized - 1 | the same with the LB run's t0 |",
            "|---|---|---|---|---|---|---|---|"]
    for name in PATTERNS:
        if name not in results:
            continue
        r = results[name]
        load = r.get("load", [math.nan])
        rows.append(f"| {name} | {len(r['pairs'])} | {min(load):.1f}-{max(load):.1f} | {cell(r['replay_error'], True)} | "
                    f"{cell(r['predicted'])} | {cell(r['realized'])} | **{cell(r['error'], True)}** | {cell(r['error_with_lb_t0'], True)} |")
    return "\n".join(rows)


def test_closed_loop(benchmark) -> None:  # type: ignore[no-untyped-def]
    info = benchmark.pedantic(lambda: [closed_loop(p) for p in PATTERNS], rounds=1, iterations=1)
    benchmark.extra_info["patterns"] = info


def test_recorder_overhead(benchmark) -> None:  # type: ignore[no-untyped-def]
    benchmark.extra_info.update(benchmark.pedantic(overhead, rounds=1, iterations=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", nargs="*", default=[*PATTERNS, "overhead"], help=f"{', '.join(PATTERNS)}, overhead, ideal (not by default)")
    p.add_argument("--repeats", type=int, default=REPEATS)
    p.add_argument("--overhead-repeats", type=int, default=OVERHEAD_REPEATS)
    p.add_argument("--epochs", type=int, default=EPOCHS)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--keep", type=Path, default=None, help="keep the recordings and whatif folders here (PATTERN/obsI, lbI, whatifI)")
    p.add_argument("--repredict", type=Path, default=None, metavar="KEPT",
                   help="run nothing: predict again the pairs a --keep folder holds (with --json from that run: its loads)")
    args = p.parse_args()
    results: dict[str, Any] = {}
    earlier = json.loads(args.json.read_text()) if args.repredict is not None and args.json and args.json.exists() else {}
    for what in args.what:
        if args.repredict is not None:
            if what in PATTERNS and (args.repredict / what).is_dir():
                r = repredict(args.repredict, what, earlier.get(what, {}).get("load", [math.nan]))
                print(f"{what}: predicted {_fmt(r['predicted'])}, realized {_fmt(r['realized'])}, error {_fmt(r['error'], True)}, "
                      f"replay {_fmt(r['replay_error'], True)}; with the LB run's t0 {_fmt(r['lb_t0_s'])} s: "
                      f"error {_fmt(r['error_with_lb_t0'], True)}", flush=True)
                results[what] = r
            elif what in earlier:
                results[what] = earlier[what]
            continue
        if what == "ideal":
            r = ideal_check(args.repeats, args.epochs, args.keep)
            print(f"ideal: no-straggler replay of the persistent pattern / run without injection - 1: "
                  f"{_fmt(r['error'], True)}; load {r['load'][0]:.1f}->{r['load'][-1]:.1f}", flush=True)
            results[what] = r
            continue
        if what == "overhead":
            r = overhead(args.overhead_repeats, args.epochs, args.keep)
            print(f"overhead: recorder {_fmt(r['recorder_share'], True)} of epoch time; recorded/plain rate "
                  f"{_fmt(r['rate_ratio'])}; load {r['load'][0]:.1f}->{r['load'][-1]:.1f}", flush=True)
        else:
            r = closed_loop(what, args.repeats, args.epochs, args.keep)
            print(f"{what}: predicted {_fmt(r['predicted'])}, realized {_fmt(r['realized'])}, "
                  f"error {_fmt(r['error'], True)}, replay {_fmt(r['replay_error'], True)}; with the LB run's t0 "
                  f"{_fmt(r['lb_t0_s'])} s: error {_fmt(r['error_with_lb_t0'], True)}; "
                  f"load {r['load'][0]:.1f}->{r['load'][-1]:.1f}", flush=True)
        results[what] = r
    if any(p in results for p in PATTERNS):
        print(markdown(results))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
