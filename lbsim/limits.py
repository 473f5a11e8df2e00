"""Bounds on what a user controls that costs memory or time, and a repr that never builds a large value.

Every bound is checked *before* the work it guards (parsing, materialising workers, expanding a
sweep, allocating a history), and a value past it is an :class:`~lbsim.errors.InputError` naming
the key, the value and the bound (exit 2). The bounds are far above any real scenario (the largest
shipped or benchmarked ones: a 3 KB file, 1,024 workers, a 425 KB trace), and low enough that a
refused input is refused in well under a second and a few MB:

* a scenario or sweep file: at most ``MAX_YAML_BYTES`` (1 MiB; a ``--set`` value at most
  ``MAX_SET_CHARS``). The bytes, not only the parsed data, are bounded because reading them is
  the cost: the YAML parser reads about 0.6-2 MB/s, comments included (49 MB of comments took
  84 s on the 2-core development machine at load ~10), so a large file would be a long silent
  wait before any check. 1 MiB is ~300 times the largest shipped scenario and reads in about a
  second; the refusal says so, and long notes belong in a separate file;
* YAML structure: at most ``MAX_YAML_NODES`` nodes *after* alias expansion (an "anchor bomb" of
  ``k`` levels of ``n`` aliases is ``n**k`` nodes while its text is tiny) -- and the scenario with
  all its ``--set`` values together no more (:func:`exceeds_values`) --, nesting at most
  ``MAX_YAML_DEPTH`` deep (checked while composing, so no RecursionError);
* any list in a configuration section: at most ``MAX_LIST_ITEMS`` items;
* the cluster: at most ``MAX_WORKERS`` workers in all, summed over the groups' ``count`` before
  any worker exists;
* a run's length: ``workload.updates`` may plan at most ``MAX_WORKER_ITERATIONS`` recorded
  worker-iterations (updates x workers for synchronous schemes, updates for asynchronous ones;
  about 3x the largest benchmarked run, a few GB of records); a run that only a time budget or a
  sample target ends is bounded by the same count, estimated with every worker at its nominal
  speed and the global batch split evenly (``lbsim.scenario.resolve``);
* a scheme's history or window lengths: at most ``MAX_HISTORY`` (per-field ``le=`` bounds);
* a sweep: at most ``MAX_SWEEP_RUNS`` runs (points x repetitions), counted before expansion;
* a trace file: at most ``MAX_TRACE_ROWS`` data rows;
* a measurement file of ``lbsim calibrate``: at most ``MAX_MEASURED_BYTES`` (checked before reading) and
  ``MAX_MEASURED_ROWS`` rows (each distinct row is one simulation, ~3 ms: the bound is a few minutes;
  the Pollux files hold at most 1,183), a placement at most ``MAX_WORKERS`` GPUs;
* ``lbsim sweep -j``: at most ``MAX_JOBS`` local worker processes;
* ``lbsim train | profile | validate``: at most ``MAX_LOCAL_RANKS`` ranks on this machine (one process
  each, a few hundred MB with torch; across machines torchrun has only ``MAX_WORKERS``), and
  ``validate --repeats`` at most ``MAX_REPEATS`` (each repeat is a whole runtime run).

:func:`short_repr` is the repr used in error messages: it stops after ``limit`` characters however
large (or self-similar, as an alias bomb is) the value is.
"""

from __future__ import annotations

from typing import Any

MAX_YAML_BYTES = 2**20
MAX_SET_CHARS = 16 * 1024
MAX_YAML_NODES = 100_000
MAX_YAML_DEPTH = 64
MAX_LIST_ITEMS = 10_000
MAX_WORKERS = 16_384
MAX_WORKER_ITERATIONS = 2**25
MAX_HISTORY = 10_000
MAX_SWEEP_RUNS = 10_000
MAX_TRACE_ROWS = 500_000
MAX_MEASURED_BYTES = 64 * 2**20
MAX_MEASURED_ROWS = 100_000
MAX_JOBS = 256
MAX_LOCAL_RANKS = 256
MAX_REPEATS = 100


def exceeds_values(data: Any, bound: int = MAX_YAML_NODES) -> bool:
    """Whether plain ``data`` holds more than ``bound`` values (shared parts counted each time they appear).

    Walks at most ``bound + 1`` values, so it is cheap however large (or self-similar) ``data`` is.
    """
    count = 0
    stack = [data]
    while stack:
        v = stack.pop()
        count += 1
        if count > bound:
            return True
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return False


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, built piece by piece: the cost is O(limit), not O(value)."""
    parts: list[str] = []
    size = 0

    def emit(text: str) -> bool:
        nonlocal size
        parts.append(text)
        size += len(text)
        return size <= limit

    def walk(v: Any, depth: int) -> bool:
        if isinstance(v, (list, tuple, dict)) and depth < 32:
            items: list[Any]
            if isinstance(v, dict):
                opener, closer = "{", "}"
                items = [kv for _, kv in zip(range(limit + 1), v.items(), strict=False)]
            else:
                opener, closer = ("[", "]") if isinstance(v, list) else ("(", ")")
                items = list(v[: limit + 1])
            if not emit(opener):
                return False
            for i, item in enumerate(items):
                if i and not emit(", "):
                    return False
                if isinstance(v, dict):
                    key, val = item
                    if not (walk(key, depth + 1) and emit(": ") and walk(val, depth + 1)):
                        return False
                elif not walk(item, depth + 1):
                    return False
            return emit(closer)
        if isinstance(v, str) and len(v) > limit:
            v = v[: limit + 1]
        return emit(repr(v) if depth < 32 else "...")

    walk(value, 0)
    text = "".join(parts)
    return text if len(text) <= limit else text[: limit - 3] + "..."
