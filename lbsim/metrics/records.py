"""The records engines emit. Metrics are observed, never computed inside the model.

An :class:`IterationRecord` is one worker-iteration, from the moment the worker started it to
the moment it could start the next (after its pull). ``fetch_s + compute_s + comm_s + wait_s =
end_s - start_s``: ``fetch_s`` is reading the batch's samples (the stage before compute, from
``start_s`` to ``start_s + fetch_s``; 0 without a ``data:`` section), ``comm_s`` is time moving
gradient bytes (push, pull, all-reduce, queueing at a NIC included), ``wait_s`` the rest
(barriers, gates, the server's apply queue).

An :class:`UpdateRecord` is one global model update: which gradients it contains and how many
samples. Synchronous updates are batch-weighted: ``g = sum_i (x_i / X) g_i`` where X is the
samples in the update, so each record's ``weight`` is ``x_i / X`` (the weights of an update sum
to 1). ``staleness`` of an iteration is the number of server updates between the worker's
pull and its push being applied (0 for synchronous schemes).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import overload

import numpy as np


@dataclass(frozen=True, slots=True)
class IterationRecord:
    worker: int
    iteration: int  # the worker's own clock: 0, 1, 2, ...
    update: int  # global update that contains this gradient (-1: dropped)
    start_s: float
    compute_s: float
    comm_s: float
    wait_s: float
    end_s: float
    batch: int
    staleness: int
    dropped: bool = False
    weight: float = 1.0  # this gradient's share in its update: x_i / (samples in the update); 0 if dropped
    fetch_s: float = 0.0  # reading the batch's samples before compute (0 when data are local and free)

    @property
    def iteration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class UpdateRecord:
    update: int  # 0, 1, 2, ...
    time_s: float
    samples: int
    gradients: int


ITERATION_COLUMNS = tuple(f.name for f in fields(IterationRecord))
UPDATE_COLUMNS = tuple(f.name for f in fields(UpdateRecord))


# -- compact storage --------------------------------------------------------------------------
# A million IterationRecord objects take ~350 MB of Python objects; the same records as numpy
# columns take 93 bytes each. Engines append to an IterationLog (rows, or whole column blocks
# from the simulator's synchronous fast path); a run's result holds the IterationTable it
# builds: a read-only sequence of IterationRecord (made on access), so every consumer that
# iterates, indexes, sorts or compares records keeps working, and the summary reads the columns.

ITERATION_DTYPES: dict[str, type] = {
    "worker": np.int64, "iteration": np.int64, "update": np.int64, "start_s": np.float64,
    "compute_s": np.float64, "comm_s": np.float64, "wait_s": np.float64, "end_s": np.float64,
    "batch": np.int64, "staleness": np.int64, "dropped": np.bool_, "weight": np.float64,
    "fetch_s": np.float64,
}
assert tuple(ITERATION_DTYPES) == ITERATION_COLUMNS

_CHUNK = 65_536  # rows converted to columns at a time (bounds the Python objects alive at once)


class IterationTable(Sequence[IterationRecord]):
    """Worker-iteration records held as numpy columns, read as :class:`IterationRecord` objects.

    ``columns[name]`` is one array per field of :class:`IterationRecord` (``ITERATION_DTYPES``),
    all of one length. Indexing and iteration build records on access (Python ``int``/``float``/
    ``bool`` fields, equal to the records the engine emitted); ``==`` compares with any sequence
    of records, element by element.
    """

    __slots__ = ("columns", "_n")

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        missing = [c for c in ITERATION_COLUMNS if c not in columns]
        if missing:
            raise ValueError(f"missing columns {missing}")
        self.columns = {c: np.asarray(columns[c], dtype=ITERATION_DTYPES[c]) for c in ITERATION_COLUMNS}
        lengths = {len(v) for v in self.columns.values()}
        if len(lengths) != 1:
            raise ValueError(f"columns of different lengths {sorted(lengths)}")
        self._n = lengths.pop()

    @classmethod
    def from_records(cls, records: Iterable[IterationRecord]) -> IterationTable:
        log = IterationLog()
        for r in records:
            log.append(r)
        return log.table()

    def __len__(self) -> int:
        return self._n

    def _rows(self, start: int, stop: int) -> Iterator[IterationRecord]:
        cols = [self.columns[c][start:stop].tolist() for c in ITERATION_COLUMNS]
        return map(IterationRecord, *cols)

    def __iter__(self) -> Iterator[IterationRecord]:
        for start in range(0, self._n, _CHUNK):
            yield from self._rows(start, min(self._n, start + _CHUNK))

    @overload
    def __getitem__(self, index: int) -> IterationRecord: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[IterationRecord, ...]: ...

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            if step == 1:
                return tuple(self._rows(start, max(start, stop)))
            return tuple(self[i] for i in range(start, stop, step))
        i = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError("iteration record index out of range")
        return IterationRecord(*(self.columns[c][i].item() for c in ITERATION_COLUMNS))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IterationTable):
            return self._n == other._n and all(
                np.array_equal(self.columns[c], other.columns[c]) for c in ITERATION_COLUMNS
            )
        if isinstance(other, (list, tuple, Sequence)) and not isinstance(other, (str, bytes)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"IterationTable({self._n} records)"

    def column(self, name: str) -> np.ndarray:
        """One field of every record, in record order (read-only view)."""
        col = self.columns[name].view()
        col.flags.writeable = False
        return col


class IterationLog:
    """Append-only builder of an :class:`IterationTable`: single records or whole column blocks."""

    __slots__ = ("_blocks", "_rows", "_n")

    def __init__(self) -> None:
        self._blocks: list[dict[str, np.ndarray]] = []
        self._rows: list[IterationRecord] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def append(self, rec: IterationRecord) -> None:
        self._rows.append(rec)
        self._n += 1
        if len(self._rows) >= _CHUNK:
            self._flush()

    def extend_columns(self, block: dict[str, np.ndarray]) -> None:
        """Append rows given column-wise (every column of ITERATION_COLUMNS, one length)."""
        self._flush()
        n = len(block["worker"])
        self._blocks.append(block)
        self._n += n

    def _flush(self) -> None:
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        self._blocks.append({c: np.array([getattr(r, c) for r in rows], dtype=ITERATION_DTYPES[c])
                             for c in ITERATION_COLUMNS})

    def table(self) -> IterationTable:
        self._flush()
        if not self._blocks:
            return IterationTable({c: np.zeros(0, dtype=t) for c, t in ITERATION_DTYPES.items()})
        if len(self._blocks) > 1:  # keep one block, so a second call does not copy again
            self._blocks = [{c: np.concatenate([b[c] for b in self._blocks]) for c in ITERATION_COLUMNS}]
        return IterationTable(self._blocks[0])
