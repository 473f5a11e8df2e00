"""Atomic writers: a result file is either absent or complete, never half-written.

Each file is written to a temporary name in the same directory, flushed and fsynced, then
renamed over the target (``os.replace`` is atomic on POSIX and Windows).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO


@contextlib.contextmanager
def _atomic_file(path: str | Path) -> Iterator[TextIO]:
    """An open text file that, when the block ends without error, replaces ``path`` at once.

    Written under a temporary name in the same directory, flushed and fsynced, then renamed over
    ``path``; on an error the temporary file is removed and ``path`` is untouched.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    with _atomic_file(path) as fh:
        fh.write(text)


def json_text(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def write_json(path: str | Path, data: Any) -> None:
    atomic_write_text(path, json_text(data))


def _cell(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float):
        return f"{v:.12g}"
    return v


def csv_text(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([_cell(v) for v in row])
    return buf.getvalue()


def write_csv(path: str | Path, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Like ``atomic_write_text(path, csv_text(columns, rows))``, byte for byte, but streamed.

    Rows go to the temporary file as they come (in blocks of ``_CSV_BLOCK``), so a million-row
    file never exists as one string in memory; the rename at the end keeps the write atomic.
    """
    with _atomic_file(path) as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(columns)
        block: list[list[Any]] = []
        for row in rows:
            block.append([_cell(v) for v in row])
            if len(block) >= _CSV_BLOCK:
                w.writerows(block)
                block = []
        w.writerows(block)


_CSV_BLOCK = 4096


def atomic_write_rows(path: str | Path, header: str, blocks: Iterable[str]) -> None:
    """Write ``header`` then each text block to ``path`` atomically (temporary file, renamed)."""
    with _atomic_file(path) as fh:
        fh.write(header)
        for block in blocks:
            fh.write(block)
