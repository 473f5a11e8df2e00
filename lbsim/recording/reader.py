"""Reading a recording (a job folder or one generic CSV/Parquet file) into a checked :class:`Recording`.

Every problem is an :class:`~lbsim.errors.InputError` whose path is the file and whose message
names the row (1-based, the header not counted) and, for CSV, the line: a missing shard, a rank
with no rows, a row of the wrong rank, steps that do not follow each other, moments out of order
or past the bounds of :mod:`lbsim.recording.schema` (negative, a step of more than an hour, a clock
past a year: a unit error), and a shard cut mid-row.

A killed job (``complete`` false or missing in ``job.json``) is expected to end untidily: the last
line of a shard may be cut (it is dropped) and the ranks may have written different numbers of
steps. It is read up to the last step every rank completed, and the recording's notes say how many
steps were used. In a complete job or a generic file the same defects are errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from lbsim.errors import InputError
from lbsim.limits import MAX_WORKERS, short_repr
from lbsim.recording.checks import check_rank_order, check_rows, first_index
from lbsim.recording.files import Table, read_table
from lbsim.recording.schema import (
    FORMAT,
    HEADER_FILE,
    HEADER_KEYS,
    MAX_ROWS,
    REQUIRED_HEADER_KEYS,
    SHARD_STEM,
    SHARD_SUFFIXES,
    VERSION,
    Recording,
)


# -- the header --------------------------------------------------------------------------------------------
def _header(folder: Path) -> dict[str, Any]:
    path = folder / HEADER_FILE
    name = str(path)
    if not path.is_file():
        raise InputError(name, f"not found: a job folder holds {HEADER_FILE} and one rank-NNNNN.csv per rank "
                               "(or give one generic CSV file with every rank's rows)")
    if path.stat().st_size > 2**20:
        raise InputError(name, "more than 1 MiB: not a recording header")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(name, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(name, "expected a JSON object")
    for key in data:
        if key not in HEADER_KEYS:
            raise InputError(f"{name}: {short_repr(key, 30)}", f"unknown key; valid keys: {', '.join(HEADER_KEYS)}")
    for key in REQUIRED_HEADER_KEYS:
        if key not in data:
            raise InputError(f"{name}: {key}", f"required ({HEADER_KEYS[key]})")
    if data["format"] != FORMAT:
        raise InputError(f"{name}: format", f"expected {FORMAT!r}, got {short_repr(data['format'])}")
    if data["version"] != VERSION:
        raise InputError(f"{name}: version", f"this lbsim reads version {VERSION}, got {short_repr(data['version'])}")
    world = data["world_size"]
    if not isinstance(world, int) or isinstance(world, bool) or not 1 <= world <= MAX_WORKERS:
        raise InputError(f"{name}: world_size", f"must be an integer in [1, {MAX_WORKERS}], got {short_repr(world)}")
    scheme = data.get("scheme", {"name": "bsp"})
    if not isinstance(scheme, dict) or not isinstance(scheme.get("name"), str):
        raise InputError(f"{name}: scheme", f"expected a mapping with a name, e.g. {{\"name\": \"bsp\"}}, got {short_repr(scheme)}")
    if not isinstance(data.get("complete", False), bool):
        raise InputError(f"{name}: complete", f"expected true or false, got {short_repr(data['complete'])}")
    gb = data.get("gradient_bytes")
    if gb is not None and (not isinstance(gb, int) or isinstance(gb, bool) or not 0 < gb <= 2**50):
        raise InputError(f"{name}: gradient_bytes", f"expected a positive integer or null, got {short_repr(gb)}")
    return data


def _shard_path(folder: Path, rank: int) -> Path:
    stem = SHARD_STEM.format(rank=rank)
    found = [folder / f"{stem}{s}" for s in SHARD_SUFFIXES if (folder / f"{stem}{s}").is_file()]
    if not found:
        raise InputError(str(folder / f"{stem}.csv"), f"missing: rank {rank}'s shard ({HEADER_FILE} says the job has "
                                                       "this rank; every rank writes its own shard)")
    if len(found) > 1:
        raise InputError(str(found[1]), f"rank {rank} has two shards ({found[0].name} and {found[1].name}): keep one")
    return found[0]


# -- assembling -------------------------------------------------------------------------------------------
def _per_rank(tables: list[tuple[Table, np.ndarray]], *, complete: bool) -> tuple[list[tuple[Table, np.ndarray]], int, int, list[str]]:
    """Cut every rank to the steps all ranks hold; returns (tables, steps recorded, steps used, notes)."""
    firsts = [int(t.cols["step"][idx[0]]) for t, idx in tables]
    lasts = [int(t.cols["step"][idx[-1]]) for t, idx in tables]
    notes: list[str] = []
    if len(set(firsts)) > 1:
        r = int(np.argmax(firsts))
        t, idx = tables[r]
        raise t.error(int(idx[0]), f"rank {r}'s first step is {firsts[r]}, rank {int(np.argmin(firsts))}'s "
                                   f"{min(firsts)}: every rank records from the same step")
    first, last = firsts[0], min(lasts)
    if len(set(lasts)) > 1 and complete:
        r = int(np.argmin(lasts))
        t, idx = tables[r]
        raise t.error(int(idx[-1]), f"rank {r} ends at step {lasts[r]}, rank {int(np.argmax(lasts))} at step {max(lasts)}: "
                                    "the ranks of a complete job record the same steps (a killed job's header says complete: false)")
    recorded = max(lasts) - first + 1
    used = last - first + 1
    if used < recorded:
        notes.append(f"killed job: used {used} of {recorded} recorded steps (up to step {last}, the last every rank completed)")
    cut = [t.name for t, _ in tables if t.cut]
    if cut:
        notes.append(f"killed job: dropped the cut last row of {', '.join(sorted(set(cut)))}")
    return [(t, idx[: used]) for t, idx in tables], recorded, used, notes


def _assemble(source: str, tables: list[tuple[Table, np.ndarray]], *, header: dict[str, Any]) -> Recording:
    complete = bool(header.get("complete", False))
    tables, recorded, used, notes = _per_rank(tables, complete=complete)
    has_tokens = all(t.cols["tokens"] is not None for t, _ in tables)

    def stack(col: str) -> np.ndarray:
        return np.stack([t.cols[col][idx] for t, idx in tables])

    first_table, first_idx = tables[0]
    return Recording(
        source=source,
        hosts=tuple(t.cols["host"][int(idx[0])] for t, idx in tables),
        devices=tuple(t.cols["device"][int(idx[0])] for t, idx in tables),
        steps=first_table.cols["step"][first_idx].copy(),
        samples=stack("samples"),
        batch_ready_s=stack("batch_ready_s"),
        last_bucket_s=stack("last_bucket_s"),
        step_end_s=stack("step_end_s"),
        optimizer_end_s=stack("optimizer_end_s"),
        tokens=stack("tokens") if has_tokens else None,
        scheme=dict(header.get("scheme", {"name": "bsp"})),
        complete=complete,
        steps_recorded=max(recorded, used),
        gradient_bytes=header.get("gradient_bytes"),
        notes=tuple(notes),
    )


def _job_folder(folder: Path) -> Recording:
    header = _header(folder)
    world = int(header["world_size"])
    complete = bool(header.get("complete", False))
    extra = sorted(p.name for p in folder.glob("rank-*") if p.suffix in SHARD_SUFFIXES
                   and not (p.stem[5:].isdigit() and int(p.stem[5:]) < world))
    if extra:
        raise InputError(str(folder / extra[0]), f"a shard beyond world_size {world} in {HEADER_FILE}")
    tables: list[tuple[Table, np.ndarray]] = []
    total = 0
    for rank in range(world):
        t = read_table(_shard_path(folder, rank), allow_cut=not complete)
        if len(t) == 0:
            raise InputError(t.name, f"rank {rank} has no rows (every rank records every step; "
                                     "a rank that never completed a step makes the job unreadable)")
        total += len(t)
        if total > MAX_ROWS:
            raise InputError(t.name, f"more than {MAX_ROWS} rows over the shards, the bound for a recording")
        check_rows(t)
        if (i := first_index(t.cols["rank"] != rank)) is not None:
            raise t.error(i, f"rank {int(t.cols['rank'][i])} in rank {rank}'s shard")
        idx = np.arange(len(t))
        check_rank_order(t, idx)
        tables.append((t, idx))
    return _assemble(str(folder), tables, header=header)


def _generic(path: Path, scheme: dict[str, Any] | None) -> Recording:
    t = read_table(path, allow_cut=False)
    if len(t) == 0:
        raise InputError(str(path), "no rows after the header")
    check_rows(t)
    ranks = t.cols["rank"]
    world = int(ranks.max()) + 1
    if world > MAX_WORKERS:
        raise InputError(str(path), f"rank {world - 1}: more than {MAX_WORKERS} ranks")
    order = np.argsort(ranks, kind="stable")
    bounds = np.searchsorted(ranks[order], np.arange(world + 1))
    tables = []
    for r in range(world):
        idx = order[bounds[r]:bounds[r + 1]]
        if len(idx) == 0:
            raise InputError(str(path), f"rank {r} has no rows (ranks 0 to {world - 1} appear: every rank records every step)")
        check_rank_order(t, idx)
        tables.append((t, idx))
    header = {"scheme": scheme or {"name": "bsp"}, "complete": True}
    return _assemble(str(path), tables, header=header)


def read_recording(path: str | Path, *, scheme: dict[str, Any] | None = None) -> Recording:
    """The checked recording at ``path``: a job folder (``job.json`` + one shard per rank) or one generic
    CSV/Parquet file with every rank's rows (``scheme``: the scheme it ran, default plain DDP = ``bsp``)."""
    p = Path(path)
    if p.is_dir():
        rec = _job_folder(p)
        if scheme is not None:
            rec = Recording(**{**rec.__dict__, "scheme": dict(scheme)})
        return rec
    if not p.exists():
        raise InputError(str(p), "not found: expected a job folder (job.json + rank-NNNNN.csv) or a CSV/Parquet file")
    return _generic(p, scheme)
