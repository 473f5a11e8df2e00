"""``lbsim profile-model``: the measured t(b) of one training step of a torch module on this device.

``lbsim profile`` measures the runtime's own models inside a scenario's ranks; this measures any
``torch.nn.Module`` alone, so a catalog entry (:mod:`lbsim.scenario.catalog`) can rest on a
measurement: a torchvision model built without weights (``torchvision:resnet50``), the DDP
example's network (``examples/ddp_digits.py:Net``), or a module of the user's (``pkg.mod:factory``).

One step is what a data-parallel worker computes per iteration on a local batch of ``b`` samples::

    zero_grad; loss = cross_entropy(model(x), y); loss.backward(); SGD(momentum 0.9).step()

on random inputs of the given shape (the step's cost does not depend on the values). For each
batch size, ``warmup`` steps are dropped (cuDNN's algorithm search, the caching allocator), then
``reps`` steps are timed one by one — with ``torch.cuda.Event`` pairs on a GPU (kernel time on the
stream, not launch time; one synchronisation after each step so steps do not overlap), with
``time.perf_counter`` on the CPU. The median per size feeds the affine fit

    t(b) = t0_s + b / samples_per_s

(least squares over the sizes, through the origin if the fit would make ``t0_s < 0``), the
catalog's compute model; ``r2`` and the largest relative residual say how affine the curve is.

Memory cap (GPU only): the peak allocated memory of a step, ``M(b)``, is affine in ``b`` too
(activations grow with the batch, weights and optimizer state do not); from ``M`` at the two
largest measured sizes, ``max_batch = floor((0.9 * total - M0) / m)`` with ``M(b) = M0 + m b`` —
a 10 % margin for the allocator's fragmentation. It is an estimate, flagged as such in the
output (``max_batch_source``); a measured OOM boundary would need a bisection of real steps.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from lbsim.errors import InputError

from .profile_fit import fit_affine

MEMORY_MARGIN = 0.9  # share of the GPU's memory a step may plan to use (allocator fragmentation)
MAX_SIZES = 16
MAX_REPS = 1000
MAX_BATCH = 1 << 16


@dataclass(frozen=True)
class SizeTiming:
    """The timed steps at one local batch size."""

    batch: int
    median_s: float
    p10_s: float
    p90_s: float
    reps: int
    peak_bytes: int | None  # GPU: peak allocated memory of one step (None on the CPU)


@dataclass(frozen=True)
class ModuleProfile:
    """A module's measured step times, their affine fit and the machine they were measured on."""

    spec: str
    input_shape: tuple[int, ...]
    classes: int
    amp: str | None  # autocast dtype, or None (fp32; TF32 as torch's defaults allow)
    parameters: int
    gradient_bytes: int
    sizes: tuple[SizeTiming, ...]
    t0_s: float
    samples_per_s: float
    r2: float
    max_rel_residual: float
    max_batch: int | None
    max_batch_source: str
    environment: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def environment(device: torch.device) -> dict[str, Any]:
    """What a measurement depends on: device name, driver, torch/CUDA/cuDNN versions, host, date."""
    env: dict[str, Any] = {
        "device": str(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(gpu=props.name, gpu_memory_bytes=int(props.total_memory), multiprocessors=props.multi_processor_count,
                   cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(), driver=_driver_version(),
                   tf32_matmul=torch.backends.cuda.matmul.allow_tf32, tf32_cudnn=torch.backends.cudnn.allow_tf32)
    else:
        env.update(cpu=platform.processor() or platform.machine())
    return env


def _driver_version() -> str | None:
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def build_module(spec: str, classes: int) -> torch.nn.Module:
    """The module named by ``spec``: ``torchvision:NAME`` (no weights, ``classes`` outputs),
    ``path/to/file.py:NAME`` or ``package.module:NAME`` (called with no arguments)."""
    source, sep, name = spec.rpartition(":")
    if not sep or not source or not name:
        raise InputError("model", f"expected SOURCE:NAME (torchvision:resnet50, examples/ddp_digits.py:Net, pkg.mod:factory), got {spec!r}")
    if source == "torchvision":
        try:
            import torchvision
        except ImportError as err:
            raise InputError("model", "torchvision is not installed (pip install torchvision)") from err
        factory = getattr(torchvision.models, name, None)
        if not callable(factory):
            raise InputError("model", f"torchvision.models has no model {name!r}")
        return factory(weights=None, num_classes=classes)
    if source.endswith(".py"):
        path = Path(source)
        if not path.is_file():
            raise InputError("model", f"{source}: no such file")
        mod_spec = importlib.util.spec_from_file_location(f"_lbsim_profiled_{path.stem}", path)
        if mod_spec is None or mod_spec.loader is None:
            raise InputError("model", f"{source}: not a Python module")
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[mod_spec.name] = module
        mod_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(source)
        except ImportError as err:
            raise InputError("model", f"cannot import {source}: {err}") from err
    factory = getattr(module, name, None)
    if not callable(factory):
        raise InputError("model", f"{source} has no callable {name!r}")
    built = factory()
    if not isinstance(built, torch.nn.Module):
        raise InputError("model", f"{spec} returned {type(built).__name__}, not a torch.nn.Module")
    return built


class StepTimer:
    """One training step of ``model`` on random data, timed on ``device`` (CUDA events or host clock)."""

    def __init__(self, model: torch.nn.Module, input_shape: Sequence[int], classes: int, device: torch.device,
                 amp: torch.dtype | None = None, seed: int = 0) -> None:
        self.model = model.to(device).train()
        self.shape = tuple(int(s) for s in input_shape)
        self.classes = classes
        self.device = device
        self.amp = amp
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9)
        self.gen = torch.Generator(device="cpu").manual_seed(seed)

    def _batch(self, b: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn((b, *self.shape), generator=self.gen).to(self.device)
        y = torch.randint(0, self.classes, (b,), generator=self.gen).to(self.device)
        return x, y

    def _step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.opt.zero_grad(set_to_none=True)
        if self.amp is not None:
            with torch.autocast(self.device.type, dtype=self.amp):
                loss = torch.nn.functional.cross_entropy(self.model(x), y)
        else:
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()

    def time(self, b: int, warmup: int, reps: int) -> SizeTiming:
        """``reps`` timed steps at batch ``b`` after ``warmup`` dropped ones."""
        x, y = self._batch(b)
        cuda = self.device.type == "cuda"
        for _ in range(warmup):
            self._step(x, y)
        if cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        times = []
        for _ in range(reps):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                self._step(x, y)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1000.0)
            else:
                t = time.perf_counter()
                self._step(x, y)
                times.append(time.perf_counter() - t)
        peak = int(torch.cuda.max_memory_allocated(self.device)) if cuda else None
        q = statistics.quantiles(times, n=10) if len(times) >= 2 else [times[0]] * 9
        return SizeTiming(b, statistics.median(times), q[0], q[-1], reps, peak)


def _memory_cap(sizes: Sequence[SizeTiming], total_bytes: int) -> int | None:
    """``floor((margin * total - M0) / m)`` from the two largest sizes' peaks (``M(b) = M0 + m b``)."""
    pts = sorted((s.batch, s.peak_bytes) for s in sizes if s.peak_bytes is not None)
    if len(pts) < 2:
        return None
    (b1, m1), (b2, m2) = pts[-2], pts[-1]
    per_sample = (m2 - m1) / (b2 - b1) if b2 > b1 else 0.0
    if per_sample <= 0:
        return None
    base = m2 - per_sample * b2
    return max(1, min(MAX_BATCH, math.floor((MEMORY_MARGIN * total_bytes - base) / per_sample)))


def _fit_quality(batches: Sequence[int], times: Sequence[float], t0: float, x: float) -> tuple[float, float]:
    """``(R^2, largest |residual| / measured)`` of the affine fit."""
    pred = [t0 + b / x for b in batches]
    mean = statistics.fmean(times)
    ss_tot = sum((t - mean) ** 2 for t in times)
    ss_res = sum((t - p) ** 2 for t, p in zip(times, pred, strict=True))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return r2, max(abs(t - p) / t for t, p in zip(times, pred, strict=True))


def check_request(batches: Sequence[int], warmup: int, reps: int, input_shape: Sequence[int], classes: int) -> None:
    """Every bound of a profile request, as an InputError naming the option."""
    if not 2 <= len(batches) <= MAX_SIZES:
        raise InputError("--batches", f"give 2 to {MAX_SIZES} batch sizes, got {len(batches)}")
    if any(not 1 <= b <= MAX_BATCH for b in batches) or len(set(batches)) != len(batches):
        raise InputError("--batches", f"distinct sizes in [1, {MAX_BATCH}], got {list(batches)}")
    if not 0 <= warmup <= MAX_REPS or not 3 <= reps <= MAX_REPS:
        raise InputError("--reps", f"warmup in [0, {MAX_REPS}] and reps in [3, {MAX_REPS}], got {warmup} and {reps}")
    if not input_shape or any(not 1 <= s <= 4096 for s in input_shape) or len(input_shape) > 4:
        raise InputError("--input-shape", f"1 to 4 dimensions in [1, 4096], got {list(input_shape)}")
    if not 2 <= classes <= 100_000:
        raise InputError("--classes", f"must be in [2, 100000], got {classes}")


def profile_module(spec: str, *, input_shape: Sequence[int], classes: int, batches: Sequence[int], device: torch.device,
                   amp: str | None = None, warmup: int = 3, reps: int = 10,
                   progress: Callable[[int, int], None] | None = None) -> ModuleProfile:
    """Time ``spec``'s training step at every size of ``batches`` and fit ``t(b) = t0_s + b / samples_per_s``."""
    check_request(batches, warmup, reps, input_shape, classes)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, None: None}.get(amp, "bad")
    if amp_dtype == "bad":
        raise InputError("--amp", f"valid: bf16, fp16 (or leave it out for fp32), got {amp!r}")
    module = build_module(spec, classes)
    timer = StepTimer(module, input_shape, classes, device, amp=amp_dtype)  # type: ignore[arg-type]
    params = sum(p.numel() for p in module.parameters() if p.requires_grad)
    grad_bytes = sum(p.numel() * p.element_size() for p in module.parameters() if p.requires_grad)
    sizes = []
    for i, b in enumerate(sorted(batches)):
        sizes.append(timer.time(b, warmup, reps))
        if progress is not None:
            progress(i + 1, len(batches))
    bs = [s.batch for s in sizes]
    ts = [s.median_s for s in sizes]
    t0, x = fit_affine(bs, ts)
    r2, worst = _fit_quality(bs, ts, t0, x)
    env = environment(device)
    cap = _memory_cap(sizes, int(env["gpu_memory_bytes"])) if device.type == "cuda" else None
    cap_source = ("estimated: peak allocated memory affine in b, extrapolated to "
                  f"{MEMORY_MARGIN:.0%} of the GPU's memory" if cap is not None else "not measured (CPU)")
    return ModuleProfile(spec=spec, input_shape=tuple(int(s) for s in input_shape), classes=classes, amp=amp,
                         parameters=params, gradient_bytes=grad_bytes, sizes=tuple(sizes), t0_s=t0,
                         samples_per_s=x, r2=r2, max_rel_residual=worst, max_batch=cap,
                         max_batch_source=cap_source, environment=env)


def catalog_source(p: ModuleProfile) -> str:
    """The catalog ``source`` text of a measured entry: what, where, with which software, when."""
    env = p.environment
    where = env.get("gpu") or env.get("cpu") or env["device"]
    sw = f"torch {env['torch']}" + (f", CUDA {env['cuda']}, cuDNN {env['cudnn']}, driver {env['driver']}" if "cuda" in env else "")
    prec = f"AMP {p.amp}" if p.amp else "fp32 (TF32 per torch defaults)" if "cuda" in env else "fp32"
    return (f"measured by lbsim profile-model {p.spec} on {where}, {sw}, {prec}, input {'x'.join(map(str, p.input_shape))}, "
            f"batches {','.join(str(s.batch) for s in p.sizes)}, median of {p.sizes[0].reps} steps each, {env['date_utc']}")
