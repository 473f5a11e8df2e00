"""A recording computed in closed form: a plain-DDP (BSP) job with known stragglers, for tests and examples.

Every step ``k`` starts on every rank at ``s_k``; rank ``r`` computes for
``c_rk = compute_s * f_r(s_k) * n_rk`` (``f_r``: its injected slowdown at the step's start, ``n_rk``:
lognormal noise of coefficient of variation ``noise_cv``), so::

    batch_ready_s   = s_k
    last_bucket_s   = s_k + c_rk
    step_end_s      = s_k + max_r c_rk + comm_s          (the last bucket's all-reduce waits for the slowest)
    optimizer_end_s = step_end_s + optimizer_s
    s_{k+1}         = optimizer_end_s + loader_s
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lbsim.recording.schema import Recording

Window = tuple[float, float | None, float]  # (start_s, end_s or None: for ever, slowdown factor)


def synthetic_recording(*, ranks: int = 3, steps: int = 60, samples: int = 32, compute_s: float = 0.05,
                        comm_s: float = 0.01, optimizer_s: float = 0.002, loader_s: float = 0.001,
                        slow: Mapping[int, Window] | None = None, noise_cv: float = 0.0, seed: int = 0,
                        hosts: tuple[str, ...] | None = None, device: str = "cpu") -> Recording:
    """A BSP job of ``ranks`` x ``steps``; ``slow[r] = (start_s, end_s, factor)`` slows rank r in that window."""
    rng = np.random.default_rng(seed)
    sigma = float(np.sqrt(np.log1p(noise_cv**2)))
    shape = (ranks, steps)
    ready, bucket, end, opt = (np.zeros(shape) for _ in range(4))
    s = 0.0
    for k in range(steps):
        f = np.ones(ranks)
        for r, (a, b, factor) in (slow or {}).items():
            if s >= a and (b is None or s < b):
                f[r] = factor
        noise = rng.lognormal(-sigma**2 / 2, sigma, ranks) if noise_cv > 0 else np.ones(ranks)
        c = compute_s * f * noise
        ready[:, k] = s
        bucket[:, k] = s + c
        end[:, k] = s + c.max() + comm_s
        opt[:, k] = end[:, k] + optimizer_s
        s = float(opt[0, k] + loader_s)
    return Recording(source="synthetic", hosts=hosts or ("node0",) * ranks, devices=(device,) * ranks,
                     steps=np.arange(steps), samples=np.full(shape, samples, dtype=np.int64), batch_ready_s=ready,
                     last_bucket_s=bucket, step_end_s=end, optimizer_end_s=opt, steps_recorded=steps)
