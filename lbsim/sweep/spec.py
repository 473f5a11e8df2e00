"""The sweep file: a base scenario, fixed overrides, factors, zipped factors and repetitions.

```yaml
name: stragglers
base: ../ec2_mixed.yaml            # the base scenario, relative to this file
set:                               # fixed overrides applied to every point (dotted keys)
  workload.time_budget_s: 300
factors:                           # crossed (full factorial), in the order given
  scheme: [bsp, asp, ssp]          # dotted key -> list of values; the column is the key
  stragglers:                      # named levels: label -> overrides; the column is the name
    "1": {contention.1.workers: [2]}
    "2": {contention.1.workers: [2, 4]}
zip:                               # each group's keys vary together (equal-length lists),
  - {contention.0.mean_on_s: [5, 30], contention.0.mean_off_s: [15, 90]}   # crossed with the rest
repetitions: 3                     # seeds base+0, base+1, base+2 for every point
```

:func:`parse_sweep` turns the plain data into a :class:`SweepSpec` (frozen, no I/O); every
mistake is an :class:`~lbsim.errors.InputError` naming the key path in the sweep file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lbsim.errors import InputError
from lbsim.limits import MAX_SWEEP_RUNS, short_repr

SWEEP_KEYS = ("name", "description", "base", "set", "factors", "zip", "repetitions")


@dataclass(frozen=True)
class Level:
    """One level of a factor: its label in each of the factor's columns and the overrides it applies."""

    labels: tuple[str, ...]
    overrides: tuple[tuple[str, Any], ...]  # (dotted key, value)


@dataclass(frozen=True)
class Factor:
    """A factor: one or more result columns (a zip group has one per key) and its levels."""

    where: str  # key path in the sweep file, for error messages
    columns: tuple[str, ...]
    levels: tuple[Level, ...]


@dataclass(frozen=True)
class SweepSpec:
    name: str
    description: str
    base: str
    fixed: tuple[tuple[str, Any], ...]
    factors: tuple[Factor, ...]
    repetitions: int

    @property
    def columns(self) -> tuple[str, ...]:
        """Every factor's columns, in the sweep's order."""
        return tuple(c for f in self.factors for c in f.columns)


def value_label(value: Any) -> str:
    """How a factor value appears in ``results.csv``: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _key(key: Any, where: str) -> str:
    if not isinstance(key, str) or not key.strip() or any(not p.strip() for p in key.split(".")):
        raise InputError(where, f"expected a dotted scenario key (e.g. contention.1.slowdown), got {short_repr(key)}")
    return ".".join(p.strip() for p in key.split("."))


def _values(values: Any, where: str) -> list[Any]:
    if not isinstance(values, list) or not values:
        raise InputError(where, f"expected a non-empty list of values, got {short_repr(values)}")
    if len(values) > MAX_SWEEP_RUNS:
        raise InputError(where, f"{len(values)} values, more than the bound of {MAX_SWEEP_RUNS} runs per sweep")
    labels = [value_label(v) for v in values]
    dup = _first_repeat(labels)
    if dup is not None:
        raise InputError(where, f"value {dup} is listed twice; each value of a factor must be distinct")
    return values


def _first_repeat(items: list[str]) -> str | None:
    """The first item that appeared before (linear time)."""
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


def _mapping(data: Any, where: str, what: str) -> Mapping[Any, Any]:
    if not isinstance(data, Mapping):
        raise InputError(where, f"expected {what}, got {type(data).__name__} {short_repr(data)}")
    return data


def _factor(name: Any, spec: Any, where: str) -> Factor:
    if isinstance(spec, list):  # dotted.key: [v1, v2, ...]
        key = _key(name, where)
        values = _values(spec, where)
        return Factor(where, (key,), tuple(Level((value_label(v),), ((key, v),)) for v in values))
    if isinstance(spec, Mapping):  # name: {label: {dotted.key: value, ...}, ...}
        if not isinstance(name, str) or not name.strip():
            raise InputError(where, f"a factor name must be a non-empty string, got {short_repr(name)}")
        if not spec:
            raise InputError(where, "a factor with named levels needs at least one level (label: {dotted.key: value})")
        levels = []
        for label, overrides in spec.items():
            lw = f"{where}.{label}"
            sets = _mapping(overrides, lw, "a mapping of dotted scenario keys to values")
            if not sets:
                raise InputError(lw, "a level must set at least one key")
            levels.append(Level((str(label),), tuple((_key(k, f"{lw}.{k}"), v) for k, v in sets.items())))
        return Factor(where, (name.strip(),), tuple(levels))
    raise InputError(where, "expected a list of values (dotted.key: [a, b]) or named levels (name: {label: {key: value}})")


def _zip_group(group: Any, where: str) -> Factor:
    items = _mapping(group, where, "a mapping of dotted keys to equal-length lists")
    if not items:
        raise InputError(where, "a zip group needs at least one key")
    keys = [_key(k, f"{where}.{k}") for k in items]
    lists = [_values(v, f"{where}.{k}") for k, v in items.items()]
    lengths = {len(v) for v in lists}
    if len(lengths) != 1:
        sizes = ", ".join(f"{k}: {len(v)}" for k, v in zip(keys, lists, strict=True))
        raise InputError(where, f"zipped lists must have equal lengths, got {sizes}")
    levels = tuple(
        Level(tuple(value_label(v[i]) for v in lists), tuple((k, v[i]) for k, v in zip(keys, lists, strict=True)))
        for i in range(lengths.pop())
    )
    return Factor(where, tuple(keys), levels)


def _overlaps(a: str, b: str) -> bool:
    pa, pb = a.split("."), b.split(".")
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


def check_disjoint(sets: list[tuple[str, str]]) -> None:
    """No two sources (``(where, dotted key)``) set the same key or one inside the other."""
    whole: dict[tuple[str, ...], list[int]] = {}  # key segments -> indices of the sets with that key
    inside: dict[tuple[str, ...], list[int]] = {}  # proper prefix -> indices of the sets whose key has it
    for i, (wa, ka) in enumerate(sets):
        parts = tuple(ka.split("."))
        earlier = [j for n in range(1, len(parts) + 1) for j in whole.get(parts[:n], ())] + inside.get(parts, [])
        for j in sorted(earlier):  # the first earlier overlapping key, as a pairwise scan would find it
            wb, kb = sets[j]
            if wb != wa and _overlaps(ka, kb):
                raise InputError(wa, f"key {ka} overlaps {kb} set by {wb}; each scenario key may be varied or fixed in one place")
        whole.setdefault(parts, []).append(i)
        for n in range(1, len(parts)):
            inside.setdefault(parts[:n], []).append(i)


def parse_sweep(data: Any) -> SweepSpec:
    """Validate a sweep file's data (the shape only; the points are checked by expansion)."""
    top = _mapping(data, "(top level)", "a mapping with base:, factors:, ...")
    unknown = [k for k in top if k not in SWEEP_KEYS]
    if unknown:
        raise InputError(str(unknown[0]), f"unknown sweep key; valid: {', '.join(SWEEP_KEYS)}")
    base = top.get("base")
    if not isinstance(base, str) or not base.strip():
        raise InputError("base", "give the base scenario file, relative to the sweep file (e.g. base: ../ec2_mixed.yaml)")
    fixed_data = _mapping(top.get("set") or {}, "set", "a mapping of dotted scenario keys to values")
    fixed = tuple((_key(k, f"set.{k}"), v) for k, v in fixed_data.items())
    factors_data = _mapping(top.get("factors") or {}, "factors", "a mapping of factors")
    factors = [_factor(name, spec, f"factors.{name}") for name, spec in factors_data.items()]
    zips = top.get("zip") or []
    if not isinstance(zips, list):
        raise InputError("zip", f"expected a list of zip groups ({{key: [..], key2: [..]}}), got {short_repr(zips)}")
    factors += [_zip_group(g, f"zip[{i}]") for i, g in enumerate(zips)]
    columns = [c for f in factors for c in f.columns]
    dup = _first_repeat(columns)
    if dup is not None or {"run", "repetition"} & set(columns):
        raise InputError("factors", f"column {dup or 'run/repetition'!r} is used twice (factor names and keys must be distinct, and not 'run' or 'repetition')")
    sets = [(f"set.{k}", k) for k, _ in fixed]
    for f in factors:
        keys = {k for level in f.levels for k, _ in level.overrides}
        sets += [(f.where, k) for k in sorted(keys)]
    check_disjoint(sets)
    reps = top.get("repetitions", 1)
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise InputError("repetitions", f"expected an integer >= 1 (runs per point, seeds base+0..k-1), got {short_repr(reps)}")
    runs = reps
    for f in factors:
        runs *= len(f.levels)
        if runs > MAX_SWEEP_RUNS:
            break
    if runs > MAX_SWEEP_RUNS:
        sizes = " x ".join([*(str(len(f.levels)) for f in factors), f"{reps} repetitions"])
        sizes = sizes if len(sizes) <= 120 else sizes[:117] + "..."
        raise InputError("factors", f"{sizes} is more than the bound of {MAX_SWEEP_RUNS} runs per sweep")
    name, description = top.get("name", ""), top.get("description", "")
    for key, text in (("name", name), ("description", description)):
        if not isinstance(text, str):
            raise InputError(key, f"expected a string, got {short_repr(text)}")
    return SweepSpec(name, description, base.strip(), fixed, tuple(factors), reps)
