"""The figures of docs/sample-cost.md: uneven sequence lengths, count vs cost balance (simulator).

    python examples/sample_cost_figures.py

1. ``scenarios/seqlen_conversations.yaml`` (8 identical A100s, Azure conversation lengths): BSP's
   count-balanced rounds lose time to waiting for the rank that drew the longest samples. The
   ideal round is every worker finishing at the round's mean compute (the same samples: a round's
   draw depends on the seed and the round only), i.e. the BSP round shortened by
   ``max_i compute_i - mean_i compute_i``; cost-balanced LB-BSP's recovery is
   ``(T_bsp - T_cost) / (T_bsp - T_ideal)`` over mean iteration times. The spread of per-rank compute
   in a round (CoV, max/median) is set beside ByteDance's sequence-length job (references.md §4.3).
2. ``scenarios/seqlen_mixed.yaml`` (2 A100 + 2 V100): mean iteration time of BSP, bucketing,
   count-based LB-BSP and cost-balanced LB-BSP.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import lbsim

ROOT = Path(__file__).resolve().parents[1]
CONV = ROOT / "scenarios" / "seqlen_conversations.yaml"
MIXED = ROOT / "scenarios" / "seqlen_mixed.yaml"
SCHEMES = {"bsp (count)": ("bsp", {}), "bucketing": ("bucketing", {}),
           "lbbsp count": (None, {"scheme.balance": "count"}), "lbbsp cost": (None, {})}


def _rounds(run: lbsim.Run) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per round: its duration, its slowest compute and its mean compute."""
    it = run.iterations
    dur, top, mean, cov, ratio = [], [], [], [], []
    for _, g in it.groupby("update"):
        c = g["compute_s"].to_numpy()
        dur.append(float(g["end_s"].max() - g["start_s"].min()))
        top.append(c.max())
        mean.append(c.mean())
        cov.append(c.std() / c.mean())
        ratio.append(c.max() / np.median(c))
    return np.array(dur), np.array(top) - np.array(mean), np.array([np.median(cov), np.median(ratio)])


def main() -> None:
    runs = {k: lbsim.simulate(CONV, scheme=s, overrides=o) for k, (s, o) in SCHEMES.items()}
    dur, excess, spread = _rounds(runs["bsp (count)"])
    t_bsp, t_ideal = dur.mean(), (dur - excess).mean()
    print(f"1. {CONV.name}: 8 identical workers, {len(dur)} rounds")
    for k, r in runs.items():
        print(f"   {k:12s} mean iteration {r.summary['mean_iteration_s']:.3f} s, wait share {r.summary['wait_fraction']:.1%}")
    t_cost = runs["lbbsp cost"].summary["mean_iteration_s"]
    print(f"   ideal (all finish together) {t_ideal:.3f} s; BSP loses {(t_bsp - t_ideal) / t_bsp:.1%} of its iteration "
          f"to the wait for the longest draw")
    print(f"   cost-balanced LB-BSP recovers {(t_bsp - t_cost) / (t_bsp - t_ideal):.1%} of the gap BSP - ideal")
    print(f"   BSP per-round compute spread across ranks: median CoV {spread[0]:.2f}, median max/median {spread[1]:.2f} "
          "(ByteDance sequence-length job: 0.23, 1.42)")
    for per in (32, 16, 8):  # ByteDance's job ran 32 data-parallel ranks
        big = {"cluster.groups.0.count": 32, "workload.global_batch": 32 * per, "workload.sample_cost.max_tokens": 2**20}
        _, _, spread32 = _rounds(lbsim.simulate(CONV, scheme="bsp", overrides=big))
        print(f"   32 ranks x {per} samples: BSP per-round compute median CoV {spread32[0]:.2f}, "
              f"max/median {spread32[1]:.2f}")
    arxiv = {"workload.sample_cost.lengths.path": "../data/token_lengths/arxiv_summarization_llama2.csv",
             "workload.sample_cost.max_tokens": 2**17}
    a_bsp = lbsim.simulate(CONV, scheme="bsp", overrides=arxiv).summary
    a_cost = lbsim.simulate(CONV, overrides=arxiv).summary
    print(f"   arXiv lengths (capped, left-skewed) instead: BSP wait share {a_bsp['wait_fraction']:.1%}, "
          f"mean iteration {a_bsp['mean_iteration_s']:.3f} s; cost-balanced LB-BSP {a_cost['mean_iteration_s']:.3f} s")
    pad = {"workload.sample_cost.batching": "padding"}
    for k, (s, o) in SCHEMES.items():
        r = lbsim.simulate(CONV, scheme=s, overrides={**o, **pad})
        print(f"   padded: {k:12s} mean iteration {r.summary['mean_iteration_s']:.3f} s")
    print(f"2. {MIXED.name}: 2 A100 + 2 V100")
    for k, (s, o) in SCHEMES.items():
        r = lbsim.simulate(MIXED, scheme=s, overrides=o)
        print(f"   {k:12s} mean iteration {r.summary['mean_iteration_s']:.3f} s, wait share {r.summary['wait_fraction']:.1%}")


if __name__ == "__main__":
    main()
