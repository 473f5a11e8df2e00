"""Writing the recording format: the header, a shard's lines, and a whole recording (tests, conversions).

The runtime's recorder (:mod:`lbsim.runtime.ddp.recorder`) writes each rank's shard with
:func:`csv_header` and :func:`csv_line`, so one function defines the text of a row. Times are
written with microsecond resolution (``%.6f``), well below any step's spread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lbsim.recording.schema import COLUMNS, FORMAT, HEADER_FILE, SHARD_STEM, TIME_COLUMNS, VERSION, Recording


def csv_header(tokens: bool) -> str:
    """A shard's header line (with the ``tokens`` column when the job has per-sample lengths)."""
    return ",".join((*COLUMNS, "tokens") if tokens else COLUMNS) + "\n"


def _text(value: str) -> str:
    return '"' + value.replace('"', '""') + '"' if any(ch in value for ch in ',"\n\r') else value


def csv_line(rank: int, host: str, device: str, step: int, samples: int, times: Sequence[float],
             tokens: int | None = None) -> str:
    """One step's row: ``times`` are (batch_ready_s, last_bucket_s, step_end_s, optimizer_end_s)."""
    cells = [str(int(rank)), _text(host), _text(device), str(int(step)), str(int(samples)),
             *(f"{t:.6f}" for t in times)]
    if tokens is not None:
        cells.append(str(int(tokens)))
    return ",".join(cells) + "\n"


def header(world_size: int, scheme: Mapping[str, Any], *, complete: bool, gradient_bytes: int | None = None,
           global_batch: int | None = None, flush_every: int | None = None, created_by: str = "") -> dict[str, Any]:
    """The job header (``job.json``): format and version, world size, scheme, completeness, sizes, the clock."""
    return {"format": FORMAT, "version": VERSION, "world_size": int(world_size), "scheme": dict(scheme),
            "complete": bool(complete), "gradient_bytes": gradient_bytes, "global_batch": global_batch,
            "clock": "seconds since the ranks' common start barrier (each rank's monotonic clock)",
            "created_by": created_by, "flush_every": flush_every}


def write_header(folder: Path, data: Mapping[str, Any]) -> None:
    """Write ``job.json`` atomically (a temporary file renamed over it)."""
    tmp = folder / f".{HEADER_FILE}.tmp"
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(folder / HEADER_FILE)


def shard_name(rank: int) -> str:
    """Rank's shard file name, ``rank-NNNNN.csv``."""
    return SHARD_STEM.format(rank=rank) + ".csv"


def write_recording(folder: Path, rec: Recording) -> Path:
    """``rec`` as a job folder (header and one CSV shard per rank)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_header(folder, header(rec.ranks, rec.scheme, complete=rec.complete, gradient_bytes=rec.gradient_bytes,
                                created_by="lbsim.recording.writer"))
    arrays = [getattr(rec, c) for c in TIME_COLUMNS]
    for r in range(rec.ranks):
        lines = [csv_header(rec.tokens is not None)]
        for k, step in enumerate(rec.steps):
            lines.append(csv_line(r, rec.hosts[r], rec.devices[r], int(step), int(rec.samples[r, k]),
                                  [float(a[r, k]) for a in arrays],
                                  None if rec.tokens is None else int(rec.tokens[r, k])))
        (folder / shard_name(r)).write_text("".join(lines), encoding="utf-8")
    return folder
