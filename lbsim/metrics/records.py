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

Every gradient an update counts has its row, however the run ends: an iteration the end cuts
(its pull, gate or barrier not over) is recorded up to the end with ``cut`` set
(:mod:`lbsim.metrics.run_end`), so the samples of the non-dropped rows add up to the samples of
the updates, exactly.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np


@dataclass(frozen=True, slots=True)
class IterationRecord:
    """One worker-iteration: when it started, how its time split (fetch, compute, communicate, wait), its batch,
    the update that used it (and its weight there) or that it was dropped, its staleness."""

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
    cut: bool = False  # the run's end came first: recorded up to the end (lbsim.metrics.run_end)

    @property
    def iteration_s(self) -> float:
        """The iteration's duration, start to end."""
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class UpdateRecord:
    """One global model update: when it was applied, the samples and the gradients it holds."""

    update: int  # 0, 1, 2, ...
    time_s: float
    samples: int
    gradients: int


ITERATION_COLUMNS = tuple(f.name for f in fields(IterationRecord))
UPDATE_COLUMNS = tuple(f.name for f in fields(UpdateRecord))


# -- compact storage --------------------------------------------------------------------------
# A million IterationRecord objects take ~350 MB of Python objects; the same records as numpy
# columns take 93 bytes each (updates: 32). Engines append to a RecordLog (rows as tuples, or
# whole column blocks from the simulator's synchronous fast path); a run's result holds the
# RecordTable it builds: a read-only sequence of records (made on access), so every consumer that
# iterates, indexes, sorts or compares records keeps working, and the summary reads the columns.

ITERATION_DTYPES: dict[str, type] = {
    "worker": np.int64, "iteration": np.int64, "update": np.int64, "start_s": np.float64,
    "compute_s": np.float64, "comm_s": np.float64, "wait_s": np.float64, "end_s": np.float64,
    "batch": np.int64, "staleness": np.int64, "dropped": np.bool_, "weight": np.float64,
    "fetch_s": np.float64, "cut": np.bool_,
}
UPDATE_DTYPES: dict[str, type] = {"update": np.int64, "time_s": np.float64, "samples": np.int64, "gradients": np.int64}
assert tuple(ITERATION_DTYPES) == ITERATION_COLUMNS and tuple(UPDATE_DTYPES) == UPDATE_COLUMNS

# rows converted to columns at a time: bounds the Python objects alive at once, and keeps a
# RecordLog's waiting rows few enough to stay in the CPU's cache until they are converted and
# freed, their memory then reused hot by the next rows' floats (65,536 rows, ~40 MB of float
# objects, were written, read and freed cold: a 60,000-update parameter-server run took 6-9 %
# longer; 4,096 rows of 14 fields, ~1.2 MB, still overflow a 1 MiB cache: 1,024 cut the misses of
# a WBSP run at 1,024 workers by a fifth, docs/performance.md)
_CHUNK = 1_024


class RecordTable(Sequence[Any]):
    """Records of one dataclass type held as numpy columns, read as record objects.

    ``columns[name]`` is one array per field (``DTYPES``), all of one length. Indexing and
    iteration build records on access (Python ``int``/``float``/``bool`` fields, equal to the
    records the engine emitted); ``==`` compares with any sequence of records, element by element.
    """

    RECORD: ClassVar[type]
    COLUMNS: ClassVar[tuple[str, ...]]
    DTYPES: ClassVar[dict[str, type]]
    ROW_DTYPE: ClassVar[np.dtype]  # one record as a structured item (the fields in column order)
    __slots__ = ("columns", "_n")

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        missing = [c for c in self.COLUMNS if c not in columns]
        if missing:
            raise ValueError(f"missing columns {missing}")
        self.columns: dict[str, np.ndarray] = {c: np.asarray(columns[c], dtype=self.DTYPES[c]) for c in self.COLUMNS}
        lengths = {len(v) for v in self.columns.values()}
        if len(lengths) != 1:
            raise ValueError(f"columns of different lengths {sorted(lengths)}")
        self._n = lengths.pop()

    @classmethod
    def empty(cls) -> Any:
        """A table of no rows, every column of its type."""
        return cls({c: np.zeros(0, dtype=t) for c, t in cls.DTYPES.items()})

    @classmethod
    def from_records(cls, records: Iterable[Any]) -> Any:
        """A table of these records, in their order."""
        log = RecordLog(cls)
        for r in records:
            log.append(r)
        return log.table()

    def __len__(self) -> int:
        return self._n

    def _rows(self, start: int, stop: int) -> Iterator[Any]:
        cols = [self.columns[c][start:stop].tolist() for c in self.COLUMNS]
        return map(self.RECORD, *cols)

    def __iter__(self) -> Iterator[Any]:
        for start in range(0, self._n, _CHUNK):
            yield from self._rows(start, min(self._n, start + _CHUNK))

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            if step == 1:
                return tuple(self._rows(start, max(start, stop)))
            return tuple(self[i] for i in range(start, stop, step))
        i = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError("record index out of range")
        return self.RECORD(*(self.columns[c][i].item() for c in self.COLUMNS))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RecordTable) and other.RECORD is self.RECORD:
            return self._n == other._n and all(np.array_equal(self.columns[c], other.columns[c]) for c in self.COLUMNS)
        if isinstance(other, (list, tuple, Sequence)) and not isinstance(other, (str, bytes)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._n} records)"

    def column(self, name: str) -> np.ndarray:
        """One field of every record, in record order (read-only view)."""
        col = self.columns[name].view()
        col.flags.writeable = False
        return col


class IterationTable(RecordTable):
    """Worker-iteration records (:class:`IterationRecord`) held as numpy columns."""

    RECORD = IterationRecord
    COLUMNS = ITERATION_COLUMNS
    DTYPES = ITERATION_DTYPES
    ROW_DTYPE = np.dtype(list(ITERATION_DTYPES.items()))
    __slots__ = ()


class UpdateTable(RecordTable):
    """Global updates (:class:`UpdateRecord`) held as numpy columns.

    Unlike iteration records, update records are made once, on first access, and kept: the same
    object comes back for the same index (``u is updates[-1]`` holds, as with a tuple).
    """

    RECORD = UpdateRecord
    COLUMNS = UPDATE_COLUMNS
    DTYPES = UPDATE_DTYPES
    ROW_DTYPE = np.dtype(list(UPDATE_DTYPES.items()))
    __slots__ = ("_records",)

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        super().__init__(columns)
        self._records: tuple[UpdateRecord, ...] | None = None

    def records(self) -> tuple[UpdateRecord, ...]:
        """Every row as an :class:`UpdateRecord` (built once, then kept)."""
        if self._records is None:
            self._records = tuple(self._rows(0, self._n))
        return self._records

    def __iter__(self) -> Iterator[UpdateRecord]:
        return iter(self.records())

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        return self.records()[index]


def columns_from_flat(flat: list[Any], names: Sequence[str], dtypes: dict[str, type]) -> dict[str, np.ndarray]:
    """Columns ``names`` (of ``dtypes``) from ``flat``: rows of ``len(names)`` numbers laid end to end.

    One pass in C reads every number as a float64 (exact for every float, and for the integers
    and booleans of records, all of magnitude below 2**53: checked), then each column is cast to
    its type. Cheaper than a structured array read from row tuples, and the engines that append
    rows this way make no tuple per row. The pass is ``struct.pack`` of native doubles (each value
    converted as ``float(v)``, the conversion ``np.array(flat, float64)`` makes) read back with
    ``np.frombuffer``: about half the machine instructions of ``np.array``, which first discovers
    the list's dtype and shape item by item.
    """
    k = len(names)
    if len(flat) % k:
        raise ValueError(f"{len(flat)} values do not make rows of {k}")
    try:
        table = np.frombuffer(struct.pack(f"{len(flat)}d", *flat), dtype=np.float64).reshape(-1, k)
    except struct.error:  # a value float() does not take (None, a string): numpy's own reading, as before
        table = np.array(flat, dtype=np.float64).reshape(-1, k)
    out: dict[str, np.ndarray] = {}
    for j, c in enumerate(names):
        col = table[:, j]
        t = dtypes[c]
        if t is np.float64:
            out[c] = np.ascontiguousarray(col)
            continue
        if len(col) and not np.abs(col).max() < _EXACT:  # NaN included: not an integer
            raise ValueError(f"column {c!r}: a value beyond the integers a float64 holds exactly")
        out[c] = col.astype(t)
    return out


_EXACT = float(2**53)


class RecordLog:
    """Append-only builder of a :class:`RecordTable`: records, field tuples, flat rows or column blocks.

    Rows wait in ``flat`` (their fields in column order, laid end to end) and move to columns
    every ``_CHUNK`` rows (:func:`columns_from_flat`)."""

    __slots__ = ("kind", "_blocks", "flat", "_k", "_n_blocks", "_limit")

    def __init__(self, kind: type[RecordTable]) -> None:
        self.kind = kind
        self._blocks: list[dict[str, np.ndarray]] = []
        self.flat: list[Any] = []  # rows not yet in columns, fields end to end
        self._k = len(kind.COLUMNS)
        self._n_blocks = 0  # rows in _blocks
        self._limit = _CHUNK * self._k

    def __len__(self) -> int:
        return self._n_blocks + len(self.flat) // self._k

    def append(self, rec: Any) -> None:
        """Add one record (its fields in the table's column order)."""
        self.add(tuple(getattr(rec, c) for c in self.kind.COLUMNS))

    def add(self, row: tuple[Any, ...]) -> None:
        """Append one record given as the tuple of its fields, in column order."""
        flat = self.flat
        flat.extend(row)
        if len(flat) >= self._limit:
            self._flush()

    def extend_rows(self, rows: list[tuple[Any, ...]]) -> None:
        """Append records given as tuples of their fields (:meth:`add` for many at once)."""
        extend = self.flat.extend
        for row in rows:
            extend(row)
        if len(self.flat) >= self._limit:
            self._flush()

    def extend_flat(self, values: list[Any]) -> None:
        """Append records given as their fields laid end to end (whole rows, column order)."""
        self.flat.extend(values)
        if len(self.flat) >= self._limit:
            self._flush()

    def extend_columns(self, block: dict[str, np.ndarray]) -> None:
        """Append rows given column-wise (every column, one length)."""
        self._flush()
        self._blocks.append(block)
        self._n_blocks += len(block[self.kind.COLUMNS[0]])

    def _flush(self) -> None:
        flat = self.flat
        if not flat:
            return
        self.flat = []
        block = columns_from_flat(flat, self.kind.COLUMNS, self.kind.DTYPES)
        del flat[:]
        self._blocks.append(block)
        self._n_blocks += len(block[self.kind.COLUMNS[0]])

    def table(self) -> Any:
        """The table of every record added so far."""
        self._flush()
        if not self._blocks:
            return self.kind.empty()
        if len(self._blocks) > 1:  # keep one block, so a second call does not copy again
            merged: dict[str, np.ndarray] = {}
            large = self._n_blocks * len(self.kind.COLUMNS) * 8 >= _GIVE_BACK_BYTES
            for c in self.kind.COLUMNS:  # column by column, dropping the parts: ~one column of extra memory
                merged[c] = np.concatenate([b[c] for b in self._blocks])
                for b in self._blocks:
                    del b[c]
                if large:  # the parts' memory goes back to the system now, not at the process's end
                    give_back_memory()
            self._blocks = [merged]
        return self.kind(self._blocks[0])


# A table whose parts take at least this much is merged giving the parts' memory back column by column.
_GIVE_BACK_BYTES = 16 * 2**20


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None where the C library has none: macOS, musl; or where the process's
    own symbols cannot be opened: Windows)."""
    try:
        return ctypes.CDLL(None).malloc_trim  # type: ignore[no-any-return]
    except (AttributeError, OSError, TypeError):
        return None


_TRIM = _malloc_trim()


def give_back_memory() -> None:
    """Return the C heap's free pages to the operating system (glibc's ``malloc_trim(0)``; nothing
    elsewhere). A table is built from thousands of blocks of 4,096 rows, each small enough for the
    C library to take from its heap; freed, they stay in the process's resident memory until the
    heap is trimmed, so without this a million-row table keeps both its blocks' memory and its
    merged columns resident: ~125 MiB more for the asp million (294 -> 169 MiB after ``simulate``)."""
    if _TRIM is not None:
        _TRIM(0)


def IterationLog() -> RecordLog:  # noqa: N802 - reads as a class
    """A :class:`RecordLog` of worker-iteration records."""
    return RecordLog(IterationTable)


class ColumnRows(Sequence[dict[str, Any]]):
    """Rows that are dicts with the same keys (a decision log), held as columns, built on access.

    ``columns`` maps each key, in row order, to a list or 1-D numpy array (one value per row);
    ``convert`` optionally maps a key to a function applied to the value as the row is built
    (e.g. rounding). Reads as a sequence of dicts, so ``rows[0]``, iteration, ``len`` and ``==``
    with a list of dicts all behave as with that list.
    """

    __slots__ = ("columns", "convert", "_n")

    def __init__(self, columns: dict[str, Any], convert: dict[str, Callable[[Any], Any]] | None = None) -> None:
        self.columns = columns
        self.convert = dict(convert or {})
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths {sorted(lengths)}")
        self._n = lengths.pop() if lengths else 0

    def __len__(self) -> int:
        return self._n

    def _values(self, key: str, start: int, stop: int) -> list[Any]:
        col = self.columns[key][start:stop]
        values = col.tolist() if isinstance(col, np.ndarray) else list(col)
        f = self.convert.get(key)
        return [f(v) for v in values] if f is not None else values

    def _rows(self, start: int, stop: int) -> Iterator[dict[str, Any]]:
        keys = list(self.columns)
        cols = [self._values(k, start, stop) for k in keys]
        return (dict(zip(keys, vals, strict=True)) for vals in zip(*cols, strict=True))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for start in range(0, self._n, _CHUNK):
            yield from self._rows(start, min(self._n, start + _CHUNK))

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._n))]
        i = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError("row index out of range")
        return next(self._rows(i, i + 1))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, Sequence)) and not isinstance(other, (str, bytes)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ColumnRows({self._n} rows: {', '.join(self.columns)})"
