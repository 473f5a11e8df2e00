"""What a scheme sees and what it decides — the contract between schemes and engines.

The scheme decides, the engine enacts. A scheme is a plain object built from its config and a
:class:`SchemeContext` (what is known about the cluster before the run). Engines call it at the
moments a real system would and carry out what it returns; a scheme never sees the engine's
future (an oracle ablation is the one named exception, and says so in its name).

Three families, told apart by the scheme class's ``driver`` (:data:`Driver`) alone:

* :class:`SyncScheme` — one global update per round. The engine asks for every worker's batch at
  each barrier (:meth:`SyncScheme.next_batches`, given the round's observations) and how many
  gradients make an update (``required_gradients``; fewer than ``n`` means backup workers).
* :class:`AsyncScheme` — workers push to a parameter server independently. The engine tells it
  of every applied push (:meth:`AsyncScheme.on_push`, with the server's time), asks before each
  iteration whether a worker may start (:meth:`AsyncScheme.may_start`, given every worker's
  clock) and which batch it takes.
* :class:`WBSPScheme` — workers keep taking local steps; a round closes at the designated slowest
  worker's upload (:meth:`WBSPScheme.on_upload`).

Optional capabilities, checked with ``isinstance``: :class:`LocalityAware`, :class:`LengthAware`,
:class:`RobustAggregation`, :class:`DecisionLog`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, cast, runtime_checkable

import numpy as np

from lbsim.fetch import DataLayout
from lbsim.samples.model import SampleModel
from lbsim.samples.rounds import RoundSamples

WorkerKind = Literal["gpu", "cpu"]
Driver = Literal["sync", "async", "wbsp"]
"""Which engine loop carries out a scheme's decisions: the one discriminator between scheme families
(each engine keeps a driver -> loop table; neither branches on scheme names)."""


@dataclass(frozen=True)
class SchemeContext:
    """What a scheme knows before the run starts: the cluster as the scenario describes it."""

    global_batch: int
    t0_s: tuple[float, ...]
    samples_per_s: tuple[float, ...]
    max_batch: tuple[int, ...]
    kinds: tuple[WorkerKind, ...]
    seed: int = 0
    data: DataLayout | None = None  # where the data lives (None: local and free); see lbsim.fetch
    sample_cost: SampleModel | None = None  # per-sample cost by length (None: every sample costs the same)

    @property
    def workers(self) -> int:
        """The number of workers."""
        return len(self.t0_s)


@dataclass(frozen=True)
class WorkerObservation:
    """One worker's iteration as a real worker could measure it."""

    worker: int
    batch: int
    compute_s: float
    comm_s: float
    wait_s: float
    cpu_available: float  # share of the worker's processor left by co-located load now, in (0, 1]
    mem_available: float = 1.0  # share of the worker's memory left by co-located load now, in (0, 1]
    # ORACLE (simulator only, for ablations): the true slowdown of the worker's next iteration,
    # i.e. its next compute time divided by the nominal t(b). None when the engine cannot know.
    oracle_slowdown: float | None = None
    fetch_s: float = 0.0  # time reading the batch's samples before compute (0 when data are local and free)
    local_samples: int = 0  # samples of the batch read from the worker's own shard
    remote_samples: int = 0  # samples of the batch read from the storage node
    # the batch's work in reference-sample units (workload.sample_cost: the sum of c(L)/c(L_ref)
    # over its samples, or padded); None without a sample-cost model (then the work is the batch)
    work: float | None = None


@dataclass(frozen=True)
class RoundObservation:
    """What the barrier of round ``update`` saw: one observation per worker (index = worker).

    ``workers`` is a tuple of :class:`WorkerObservation`, or a :class:`WorkerColumns` (the same
    observations held as arrays, from the simulator's synchronous fast path); both are sequences
    of :class:`WorkerObservation`. :func:`observation_columns` gives either as arrays.
    """

    update: int
    time_s: float
    workers: Sequence[WorkerObservation]


# The fields of a WorkerObservation, in order, and their array types in WorkerColumns.
OBSERVATION_FIELDS: tuple[tuple[str, type], ...] = (
    ("worker", int), ("batch", int), ("compute_s", float), ("comm_s", float), ("wait_s", float),
    ("cpu_available", float), ("mem_available", float), ("oracle_slowdown", float), ("fetch_s", float),
    ("local_samples", int), ("remote_samples", int), ("work", float),
)
_OPTIONAL_FIELDS = ("oracle_slowdown", "work")  # None for every worker when the engine has no value


class WorkerColumns(Sequence[WorkerObservation]):
    """Every worker's observation as one numpy array per field (index = worker).

    Reads as a sequence of :class:`WorkerObservation` (built on access, with Python ``int`` /
    ``float`` fields), so a scheme that loops over ``observation.workers`` sees what it would see
    with a tuple; a vectorised scheme takes the arrays from :func:`observation_columns`.
    ``oracle_slowdown`` may be absent (None for every worker).
    """

    __slots__ = ("arrays", "_n")

    def __init__(self, **arrays: np.ndarray | None) -> None:
        n = len(arrays["worker"])  # type: ignore[arg-type]
        self.arrays: dict[str, np.ndarray | None] = {}
        for name, kind in OBSERVATION_FIELDS:
            a = arrays.get(name)
            if a is None and name not in ("mem_available", *_OPTIONAL_FIELDS):
                raise ValueError(f"WorkerColumns needs {name}")
            if a is None and name == "mem_available":
                a = np.ones(n)
            if a is not None:
                a = np.asarray(a, dtype=np.int64 if kind is int else np.float64)
                if a.shape != (n,):
                    raise ValueError(f"{name}: expected shape ({n},), got {a.shape}")
            self.arrays[name] = a
        self._n = n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self._n)))
        i = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError("worker index out of range")
        values = {name: (None if a is None else a[i].item()) for name, a in self.arrays.items()}
        return WorkerObservation(**values)  # type: ignore[arg-type]

    def __iter__(self):  # type: ignore[no-untyped-def]
        cols = [(name, None if a is None else a.tolist()) for name, a in self.arrays.items()]
        for i in range(self._n):
            yield WorkerObservation(**{name: (None if c is None else c[i]) for name, c in cols})  # type: ignore[arg-type]


def observation_columns(workers: Sequence[WorkerObservation], fields: Sequence[str] | None = None) -> dict[str, np.ndarray | None]:
    """Arrays (float64 / int64, index = worker) of the fields of the workers' observations.

    ``fields`` limits which (default: all). ``oracle_slowdown`` and ``work`` are None unless every
    worker has one. The values are exactly the fields' values, so arithmetic on the arrays matches
    the same arithmetic on the objects.
    """
    if isinstance(workers, WorkerColumns):
        return workers.arrays
    out: dict[str, np.ndarray | None] = {}
    for name, kind in OBSERVATION_FIELDS:
        if fields is not None and name not in fields:
            continue
        values = [getattr(o, name) for o in workers]  # a list, then one conversion: the fastest way
        if name in _OPTIONAL_FIELDS and any(v is None for v in values):
            out[name] = None
            continue
        out[name] = np.array(values, dtype=np.int64 if kind is int else np.float64)
    return out


class SchemeConfig(Protocol):
    """A scheme's parameters (a scenario's ``scheme:`` section): the frozen dataclass registered with
    the scheme, whose class attribute ``kind`` is the scheme's registered name
    (:func:`lbsim.schemes.registry.register_scheme`)."""

    kind: ClassVar[str]


@runtime_checkable
class SyncScheme(Protocol):
    """A synchronous scheme: a barrier and one global update per round."""

    name: ClassVar[str]
    driver: ClassVar[str]  # "sync": the engine's round/barrier loop
    required_gradients: int

    def initial_batches(self) -> tuple[int, ...]:
        """Every worker's batch for the first round (sums to the global batch)."""
        ...

    def next_batches(self, observation: RoundObservation) -> tuple[int, ...]:
        """Every worker's batch for the next round, decided at the barrier."""
        ...

    def diagnostics(self) -> dict[str, object]:
        """Scheme-specific summary fields (e.g. prediction error), added to ``summary.json``."""
        ...


@runtime_checkable
class LocalityAware(Protocol):
    """Optional for a :class:`SyncScheme`: it decides which samples of each batch are local.

    Without it the engine samples uniformly from the whole dataset
    (:meth:`lbsim.fetch.DataLayout.default_local`).
    """

    def local_samples(self) -> tuple[int, ...]:
        """Local samples of every worker's batch, for the batches the scheme last returned."""
        ...


def local_counts(scheme: object, layout: DataLayout | None, batches: Sequence[int]) -> tuple[int, ...]:
    """Local samples of every worker's batch: the scheme's if :class:`LocalityAware` (checked to fit the
    batches), else uniform sampling (:meth:`DataLayout.default_local`); all of it without a layout.
    Both engines ask this."""
    if layout is None:
        return tuple(int(b) for b in batches)  # data local and free: every sample is local
    if isinstance(scheme, LocalityAware):
        chosen = tuple(int(v) for v in scheme.local_samples())
        if len(chosen) != len(batches) or any(not 0 <= v <= b for v, b in zip(chosen, batches, strict=True)):
            raise RuntimeError(f"scheme's local samples {chosen} do not fit its batches {tuple(batches)}")
        return chosen
    return tuple(layout.default_local(w, int(b)) for w, b in enumerate(batches))


@runtime_checkable
class LengthAware(Protocol):
    """Optional for a :class:`SyncScheme`: it decides which of a round's samples each worker computes.

    With a sample-cost model (``workload.sample_cost``) the engine draws each round's samples and
    asks, right after the round's batches were decided, for the owner of every sample; the batches
    the round runs are then the owners' counts. Without it, samples are handed out in draw order
    (:func:`lbsim.samples.rounds.contiguous_owner`).
    """

    def assign_samples(self, samples: RoundSamples) -> np.ndarray:
        """``owner[j]``: the worker that computes sample j of the round (int64, one per sample)."""
        ...


@runtime_checkable
class AsyncScheme(Protocol):
    """An asynchronous parameter-server scheme: a gate per worker iteration."""

    name: ClassVar[str]
    driver: ClassVar[str]  # "async": the engine's parameter-server loop with a gate per iteration

    def batch(self, worker: int) -> int:
        """The batch worker ``worker`` takes for its next iteration."""
        ...

    def on_push(self, worker: int, time_s: float, clocks: Sequence[int]) -> bool | None:
        """The server applied a push of ``worker`` at ``time_s`` (``clocks`` already counts it);
        with ``admits_at_push`` (below), returns ``may_start(worker, clocks)`` as it would answer now."""
        ...

    def may_start(self, worker: int, clocks: Sequence[int]) -> bool:
        """May ``worker`` start its next iteration, given every worker's clock (pushes applied)?

        Asked right after the worker's own push is applied, and again for every blocked worker
        (in the order they blocked) whenever any clock advances.
        """
        ...

    def diagnostics(self) -> dict[str, object]:
        """Scheme-specific summary fields, added to ``summary.json``."""
        ...

    # Optional: ``gate_key(clocks) -> object``. For a worker that has not pushed since it was last
    # asked, ``may_start`` can only change its answer when this key changes; the engine then
    # re-asks its blocked workers only when the key has changed (an O(1) check per push instead
    # of one call per blocked worker). Schemes without it are re-asked at every push.
    #
    # Optional: ``never_holds: ClassVar[bool] = True`` declares that ``may_start`` is always True
    # and ``on_push`` neither decides nor records anything (ASP): an engine need not consult the
    # gate at all (:attr:`lbsim.schemes.gate.Gate.free`); asking it anyway gives the same answers.
    #
    # Optional: ``admits_at_push: ClassVar[bool] = True`` declares that ``on_push`` returns what
    # ``may_start`` would answer for the pusher right after it (other held workers' answers cannot
    # change it): an engine then takes that answer instead of asking (:meth:`Gate.admit`).
    #
    # Optional: ``fixed_batch: ClassVar[bool] = True`` declares that ``batch(worker)`` answers the
    # same for every iteration of the run and asking it changes nothing: an engine may ask it once
    # per worker.
    #
    # Optional: ``reads_clocks: ClassVar[bool] = False`` declares that ``on_push``, ``may_start`` and
    # ``gate_key`` never read ``clocks`` (ElasticBSP counts its own pushes): the gate then does not
    # keep them (every clock stays 0).


@runtime_checkable
class WBSPScheme(Protocol):
    """A worker-busy synchronous scheme (driver ``wbsp``): workers keep taking local steps; the
    server closes a round when the designated slowest worker uploads."""

    name: ClassVar[str]
    driver: ClassVar[str]  # "wbsp"
    overlap: bool  # communication overlaps computation (a compute and a communication loop per worker)
    overlap_pull_blocks: bool  # overlap: a step boundary reached during a flagged pull waits for it

    def batch(self, worker: int) -> int:
        """The batch of every local step of ``worker``."""
        ...

    def observe(self, obs: WorkerObservation) -> None:
        """A worker finished a local step."""
        ...

    def observe_step(self, worker: int, step_s: float) -> None:
        """:meth:`observe` given the step time alone."""
        ...

    def on_upload(self, worker: int, steps: int, time_s: float) -> bool:
        """The server applied an upload of ``steps`` local steps; True when it closes the round."""
        ...

    def slowest(self) -> int:
        """The designated slowest worker. An upload of any other worker does not close the round
        (``on_upload`` returns False and changes nothing), so an engine may ask ``on_upload`` of
        the designated worker's uploads only; the designation changes only when ``on_upload``
        returns True."""
        ...

    def diagnostics(self) -> dict[str, object]:
        """Scheme-specific summary fields, added to ``summary.json``."""
        ...


Scheme = SyncScheme | AsyncScheme | WBSPScheme
"""Any scheme; its ``driver`` says which of the three it is."""


def is_synchronous(scheme: object) -> bool:
    """One global update per round with every worker at the barrier (driver ``sync``)? The summary's
    barrier-wait column and the planned worker-iterations follow from it; it is read off the driver."""
    return getattr(scheme, "driver", None) == "sync"


def _of_driver(scheme: object, driver: str) -> None:
    got = getattr(scheme, "driver", None)
    if got != driver:
        raise TypeError(f"scheme {getattr(scheme, 'name', scheme)!r} has driver {got!r}, not {driver!r}")


def as_sync(scheme: object) -> SyncScheme:
    """``scheme`` as the :class:`SyncScheme` its driver ``sync`` says it is (TypeError otherwise)."""
    _of_driver(scheme, "sync")
    return cast(SyncScheme, scheme)


def as_async(scheme: object) -> AsyncScheme:
    """``scheme`` as the :class:`AsyncScheme` its driver ``async`` says it is (TypeError otherwise)."""
    _of_driver(scheme, "async")
    return cast(AsyncScheme, scheme)


def as_wbsp(scheme: object) -> WBSPScheme:
    """``scheme`` as the :class:`WBSPScheme` its driver ``wbsp`` says it is (TypeError otherwise)."""
    _of_driver(scheme, "wbsp")
    return cast(WBSPScheme, scheme)


@runtime_checkable
class RobustAggregation(Protocol):
    """Optional: how an update combines the workers' gradients (rule, tolerance f) for lbsim.aggregation.
    Without it an update is the batch-weighted mean."""

    @property
    def aggregation_rule(self) -> tuple[str, int]:
        """``(rule, f)``: how the update combines the gradients (:mod:`lbsim.aggregation`) and how many may be faulty."""


MEAN_AGGREGATION: tuple[str, int] = ("mean", 0)


def aggregation_of(scheme: object) -> tuple[str, int]:
    """The scheme's aggregation rule (:class:`RobustAggregation`), else the batch-weighted mean."""
    return scheme.aggregation_rule if isinstance(scheme, RobustAggregation) else MEAN_AGGREGATION


@runtime_checkable
class DecisionLog(Protocol):
    """Optional: the scheme's own per-decision log, written as ``decisions.csv``."""

    def decision_rows(self) -> Any:
        """The scheme's decisions so far, one row each (the run folder's ``decisions`` table)."""


class Clocks(list):  # type: ignore[type-arg]
    """Every worker's clock (pushes applied) as a list of ints that also keeps, as the engine
    advances it with :meth:`tick`, its minimum and maximum — so an asynchronous gate asked at every
    push costs O(1) instead of O(n) with 1,000 workers (the lowest-indexed slowest worker is one
    scan in C, :meth:`argmin`). Read it through :func:`slowest_clock`, :func:`fastest_clock` and
    :func:`slowest_worker` (which also accept a plain sequence).

    The minimum is kept with the number of workers at it: when the last of them ticks, the
    minimum is one more and the workers at it are counted in C (``list.count``). The minimum moves
    at most once per n ticks on average, so a tick costs O(1) amortised.
    """

    __slots__ = ("low", "high", "_at_low")

    def __init__(self, n: int) -> None:
        super().__init__([0] * n)
        self.low = 0
        self.high = 0
        self._at_low = n  # workers whose clock is the minimum

    def tick(self, w: int) -> None:
        """Worker ``w`` finished one more iteration."""
        c = self[w]
        self[w] = c + 1
        if c == self.high:  # c <= high always: the maximum grows iff w was at it
            self.high = c + 1
        if c == self.low:
            self.tick_low(c)

    def tick_low(self, c: int) -> None:
        """A worker at the minimum ``c`` ticked (its clock is now ``c + 1``)."""
        left = self._at_low - 1
        if left:
            self._at_low = left
        else:  # it was the last at the minimum: every clock is now >= c + 1, its own among them
            self.low = c + 1
            self._at_low = self.count(c + 1)

    def argmin(self) -> int:
        """A slowest worker: the lowest index among those with the smallest clock."""
        return self.index(self.low)


def slowest_clock(clocks: Sequence[int]) -> int:
    """``min(clocks)``."""
    try:
        return clocks.low  # type: ignore[attr-defined,no-any-return]  # a Clocks keeps it
    except AttributeError:
        return min(clocks)


def fastest_clock(clocks: Sequence[int]) -> int:
    """``max(clocks)``."""
    try:
        return clocks.high  # type: ignore[attr-defined,no-any-return]  # a Clocks keeps it
    except AttributeError:
        return max(clocks)


def slowest_worker(clocks: Sequence[int]) -> int:
    """The lowest-indexed worker with the smallest clock."""
    if isinstance(clocks, Clocks):
        return clocks.argmin()
    return min(range(len(clocks)), key=lambda i: (clocks[i], i))
