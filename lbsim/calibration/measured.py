"""Measured step times: the rows ``lbsim calibrate`` fits and predicts.

Two input formats, both read into :class:`Row` (``placement`` = GPUs used on each node):

* **CSV** (the Pollux format): columns ``placement`` (one digit per node, the GPUs used there:
  ``"44"`` = 2 nodes × 4 GPUs; nodes of 10+ GPUs dash-separated: ``"16-16"``, one such node ``"16-"``), ``local_bsz`` (per-GPU batch), ``step_time`` (s per iteration)
  and optionally ``sync_time`` (s, the non-overlapped all-reduce tail). Extra columns are kept
  untouched for the predictions file.
* **``profile.json``** of ``lbsim profile`` (the runtime's measurements of ``n`` ranks on one
  machine): for each profiled batch ``b`` a single-GPU row (``placement "1"``, step time = the mean
  compute time over the ranks: compute alone, as one GPU alone would run) and an ``n``-rank row
  (``placement`` = ``n`` ranks on ``gpus_per_node``-sized nodes, step time = that compute + the
  mean measured round overhead).

Every problem is an :class:`~lbsim.errors.InputError` naming the file, line and column.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lbsim.errors import InputError
from lbsim.limits import MAX_MEASURED_BYTES, MAX_MEASURED_ROWS, MAX_WORKERS, short_repr

REQUIRED = ("placement", "local_bsz", "step_time")
# A measured step lies in [1 µs, 10^6 s] (a kernel launch to eleven days); outside, logs and fits lose meaning.
STEP_TIME_MIN_S = 1e-6
STEP_TIME_MAX_S = 1e6
MAX_LOCAL_BSZ = 2**24


@dataclass(frozen=True)
class Row:
    """One measurement: ``placement`` (GPUs per node), per-GPU batch, step time (s), sync tail (s) or None."""

    placement: tuple[int, ...]
    local_bsz: int
    step_time_s: float
    sync_time_s: float | None = None
    extra: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """The placement as the tables write it (:func:`placement_label`: ``124``, ``8-16``)."""
        return placement_label(self.placement)

    @property
    def gpus(self) -> int:
        """GPUs in the placement, ``Σ g_k``."""
        return sum(self.placement)


def role_of(row: Row, fit_placements: Collection[tuple[int, ...]]) -> str:
    """``single`` (placement 1: t(b) is fitted from it), ``fit`` (a fit placement) or ``held_out`` (predicted only)."""
    if row.placement == (1,):
        return "single"
    return "fit" if row.placement in fit_placements else "held_out"


def placement_label(placement: tuple[int, ...]) -> str:
    """``(4, 4)`` -> ``"44"``; with a node of 10+ GPUs, dash-separated (``"16-16"``; one node: ``"16-"``)."""
    if all(g <= 9 for g in placement):
        return "".join(str(g) for g in placement)
    return "-".join(map(str, placement)) + ("-" if len(placement) == 1 else "")


def parse_placement(text: str, where: str) -> tuple[int, ...]:
    """``"1212"`` -> (1, 2, 1, 2); nodes of 10+ GPUs as ``"16-16"`` (one node: ``"16-"``). InputError at ``where``."""
    s = text.strip()
    parts = s.strip("-").split("-") if "-" in s else list(s)
    try:
        sizes = tuple(int(p) for p in parts)
    except ValueError:
        sizes = ()
    if not s or not sizes or any(g < 1 for g in sizes):
        raise InputError(where, f"bad placement {text!r}: one digit (1-9) per node, the GPUs used there, "
                                "e.g. 44 = 2 nodes x 4 GPUs (16-16 for nodes of 10+ GPUs, 16- for one)")
    return sizes


def parse_fit_placements(text: str) -> tuple[tuple[int, ...], ...]:
    """``--fit-placements`` (comma-separated placements such as ``2,4,11``) as GPUs-per-node tuples."""
    items = [s for s in text.split(",") if s.strip()]
    if not items:
        raise InputError("--fit-placements", "give at least one placement, e.g. 2,4,11,22,1111")
    return tuple(parse_placement(s, "--fit-placements") for s in items)


def _positive(value: str, where: str, *, integer: bool = False) -> float:
    try:
        x = float(value)
    except ValueError:
        raise InputError(where, f"not a number: {value!r}") from None
    if not np.isfinite(x) or x <= 0 or (integer and x != int(x)):
        kind = "a positive integer" if integer else "a positive number"
        raise InputError(where, f"must be {kind}, got {value!r}")
    return x


def read_measured_text(path: Path, what: str = "measurement file") -> str:
    """A measurement file's text (``what`` names it in errors), refused before reading when over
    :data:`~lbsim.limits.MAX_MEASURED_BYTES`; a missing or unreadable file is an :class:`InputError`."""
    try:
        if path.stat().st_size > MAX_MEASURED_BYTES:
            raise InputError(str(path), f"larger than {MAX_MEASURED_BYTES // 2**20} MiB, the bound for a {what}")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), f"{what} not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(str(path), f"cannot read the {what}: {err}") from None


def read_csv(path: Path) -> list[Row]:
    """A measurement CSV's rows (columns placement, local_bsz, step_time, optional sync_time, others kept),
    each value checked, the row count bounded."""
    text = read_measured_text(path)
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    for col in REQUIRED:
        if col not in header:
            raise InputError(f"{path}", f"missing column {col!r} (columns: placement, local_bsz, step_time, "
                                        f"optional sync_time; found: {', '.join(header) or 'none'})")
    has_sync = "sync_time" in header
    rows: list[Row] = []
    for i, rec in enumerate(reader, start=2):
        where = f"{path}:{i}"
        if len(rows) >= MAX_MEASURED_ROWS:
            raise InputError(str(path), f"more than {MAX_MEASURED_ROWS} rows, the bound for a measurement file")
        placement = parse_placement(rec["placement"] or "", f"{where}: column placement")
        if sum(placement) > MAX_WORKERS:
            raise InputError(f"{where}: column placement", f"{sum(placement)} GPUs, more than {MAX_WORKERS} (the bound "
                                                           "on workers)")
        bsz = int(_positive(rec["local_bsz"] or "", f"{where}: column local_bsz", integer=True))
        step = _positive(rec["step_time"] or "", f"{where}: column step_time")
        if not STEP_TIME_MIN_S <= step <= STEP_TIME_MAX_S:
            raise InputError(f"{where}: column step_time", f"{step:g} s is outside [{STEP_TIME_MIN_S:g}, "
                                                          f"{STEP_TIME_MAX_S:g}] s, the range of a training step")
        if bsz > MAX_LOCAL_BSZ:
            raise InputError(f"{where}: column local_bsz", f"{bsz} is more than {MAX_LOCAL_BSZ}")
        sync = None
        if has_sync and (rec.get("sync_time") or "").strip():
            try:
                sync = float(rec["sync_time"])
            except ValueError:
                raise InputError(f"{where}: column sync_time", f"not a number: {rec['sync_time']!r}") from None
            if not np.isfinite(sync) or sync < 0:
                raise InputError(f"{where}: column sync_time", f"must be >= 0, got {rec['sync_time']!r}")
        extra = tuple((k, v) for k, v in rec.items() if k not in (*REQUIRED, "sync_time") and k is not None)
        rows.append(Row(placement, bsz, step, sync, extra))
    if not rows:
        raise InputError(str(path), "no measurement rows")
    return rows


def _profile_numbers(value: object, where: str, *, allow_zero: bool) -> list[float]:
    """A non-empty list of finite numbers, each > 0 (or >= 0 with ``allow_zero``); InputError at ``where``."""
    if not isinstance(value, list) or not value:
        raise InputError(where, f"expected a non-empty list of numbers, got {short_repr(value)}")
    out = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not np.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
            raise InputError(where, f"must hold {'non-negative' if allow_zero else 'positive'} finite numbers, "
                                    f"got {short_repr(x)}")
        out.append(float(x))
    return out


def read_profile(path: Path, gpus_per_node: int | None) -> list[Row]:
    """Rows from ``lbsim profile``'s ``profile.json`` (module docstring)."""
    try:
        data = json.loads(read_measured_text(path))
        raw = data["measurements"]
        sizes_raw, compute_raw, comm_raw = raw["sizes"], raw["compute_s"], raw["comm_s"]
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(str(path), f"not an lbsim profile.json (measurements.sizes/compute_s/comm_s): {err}") from None
    if not isinstance(sizes_raw, list) or not sizes_raw or not isinstance(compute_raw, dict):
        raise InputError(f"{path}: measurements.sizes", "expected a non-empty list of batch sizes and a compute_s table")
    if len(sizes_raw) > MAX_MEASURED_ROWS // 2:
        raise InputError(f"{path}: measurements.sizes", f"more than {MAX_MEASURED_ROWS // 2} batch sizes")
    sizes = [int(_positive(str(b), f"{path}: measurements.sizes", integer=True)) for b in sizes_raw]
    ranks = None
    means = {}
    for b in sizes:
        where = f"{path}: measurements.compute_s.{b}"
        per_rank = compute_raw.get(str(b))
        if not isinstance(per_rank, list) or not per_rank:
            raise InputError(where, "expected one list of compute times per rank")
        if len(per_rank) > MAX_WORKERS or (ranks is not None and len(per_rank) != ranks):
            raise InputError(where, f"{len(per_rank)} ranks; every batch size needs the same rank count, "
                                    f"at most {MAX_WORKERS}")
        ranks = len(per_rank)
        means[b] = float(np.mean([t for worker in per_rank for t in _profile_numbers(worker, where, allow_zero=False)]))
    comm = _profile_numbers(comm_raw, f"{path}: measurements.comm_s", allow_zero=True) if comm_raw else []
    n = ranks or 1
    per_node = gpus_per_node or n
    placement = tuple(min(per_node, n - k) for k in range(0, n, per_node))
    comm_s = float(np.mean(comm)) if comm else 0.0
    rows = []
    for b in sizes:
        rows.append(Row((1,), b, means[b]))
        if n > 1:
            rows.append(Row(placement, b, means[b] + comm_s))
    return rows


def read_measurements(path: str | Path, *, gpus_per_node: int | None = None) -> list[Row]:
    """The rows of a measurement CSV or of an ``lbsim profile`` JSON (its ranks on ``gpus_per_node`` nodes)."""
    p = Path(path)
    if p.suffix == ".json":
        return read_profile(p, gpus_per_node)
    return read_csv(p)
