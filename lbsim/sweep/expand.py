"""Sweep expansion: a base scenario x factors -> resolved scenarios, each with a content hash.

Sweeps are data transforms (design.md). :func:`expand` is pure: given the parsed sweep
(:class:`~lbsim.sweep.spec.SweepSpec`) and the base scenario's data it returns every point of
the full factorial design (factors in the order written, the last varying fastest; zip groups
after the factors; repetitions innermost) as a :class:`SweepPoint` holding the resolved
scenario, its YAML (:func:`~lbsim.scenario.loader.dump_scenario`) and the run's identity: the
first 16 hex digits of the SHA-256 of that YAML. Two points that resolve to the same scenario
share one run. Every point is loaded and cross-checked here, so a bad value anywhere in the
sweep is an :class:`~lbsim.errors.InputError` before anything runs.

Overrides are applied in this order: base file, ``set:``, the command line's ``--set`` (which
may change a ``set:`` key, e.g. a shorter time budget), the point's factor levels; then ``seed``
becomes the resulting seed plus the repetition index. A key varied by a factor may be set
nowhere else (checked), so the order never silently drops a factor's value.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from lbsim.errors import InputError
from lbsim.lifecycle.guards import check_equal_work
from lbsim.limits import short_repr
from lbsim.scenario.loader import check_yaml_size, dump_scenario, read_yaml, scenario_from_data
from lbsim.scenario.overrides import apply_overrides, parse_override, parse_yaml, yaml_error_text
from lbsim.scenario.schema import Scenario, default_scheme
from lbsim.sweep.spec import SweepSpec, check_disjoint, parse_sweep

HASH_DIGITS = 16


@dataclass(frozen=True)
class SweepPoint:
    index: int
    labels: tuple[str, ...]  # one per column of the sweep, in order
    repetition: int
    run_id: str  # content hash of resolved_yaml
    resolved_yaml: str
    scenario: Scenario = field(compare=False, repr=False)


@dataclass(frozen=True)
class Sweep:
    name: str
    columns: tuple[str, ...]  # the factor columns of results.csv
    repetitions: int
    points: tuple[SweepPoint, ...]

    def run_ids(self) -> list[str]:
        """Distinct run ids, in point order."""
        return list(dict.fromkeys(p.run_id for p in self.points))


def run_id(resolved_yaml: str) -> str:
    """The identity of a run: a content hash of its resolved scenario."""
    return hashlib.sha256(resolved_yaml.encode("utf-8")).hexdigest()[:HASH_DIGITS]


def _set(data: dict[str, Any], key: str, value: Any, where: str) -> dict[str, Any]:
    # JSON is YAML, so the value goes through the very same --set machinery (list indices, new keys).
    try:
        return apply_overrides(data, [f"{key}={json.dumps(value)}"])
    except InputError as err:
        raise InputError(where, err.message) from None
    except (TypeError, ValueError):
        raise InputError(where, f"value {short_repr(value)} of {key} is not plain data (numbers, strings, lists, mappings)") from None


def expand(
    spec: SweepSpec,
    base: dict[str, Any],
    *,
    base_dir: Path | None = None,
    overrides: Sequence[str] = (),
) -> Sweep:
    """Every point of the sweep, validated; ``base_dir`` resolves relative trace paths of the base."""
    cli_keys = [".".join(parse_override(o)[0]) for o in overrides]  # may override set:, not a factor
    check_disjoint([*((f.where, k) for f in spec.factors for lv in f.levels for k, _ in lv.overrides),
                    *((f"--set {k}", k) for k in cli_keys)])
    data = base
    for key, value in spec.fixed:
        data = _set(data, key, value, f"set.{key}")
    data = apply_overrides(data, overrides)
    points: list[SweepPoint] = []
    for combo in itertools.product(*(f.levels for f in spec.factors)):
        point_data = data
        for factor, level in zip(spec.factors, combo, strict=True):
            for key, value in level.overrides:
                point_data = _set(point_data, key, value, f"{factor.where} ({key})")
        labels = tuple(lab for level in combo for lab in level.labels)
        where = ", ".join(f"{c}={lab}" for c, lab in zip(spec.columns, labels, strict=True)) or "the base scenario"
        for rep in range(spec.repetitions):
            scenario = _load_point(point_data, rep, base_dir, where)
            text = dump_scenario(scenario)
            points.append(SweepPoint(len(points), labels, rep, run_id(text), text, scenario))
    check_equal_work_across_schemes(points)
    return Sweep(spec.name, spec.columns, spec.repetitions, tuple(points))


def check_equal_work_across_schemes(points: Sequence[SweepPoint]) -> None:
    """The comparison guard of ``lbsim compare``, per group of points that differ only in their scheme:
    a sweep that stops by model updates may not compare schemes whose update holds different work
    (:func:`lbsim.lifecycle.guards.check_equal_work`)."""
    groups: dict[Scenario, dict[str, Scenario]] = {}
    for p in points:
        if p.scenario.workload.updates is not None:
            key = replace(p.scenario, scheme=default_scheme())  # the point without its scheme
            groups.setdefault(key, {}).setdefault(_scheme_label(p.scenario.scheme), p.scenario)
    for group in groups.values():
        if len(group) > 1:
            check_equal_work(list(group.items()))


def _scheme_label(config: Any) -> str:
    """``ssp`` or, with parameters off their defaults, ``ssp(staleness=3)``."""
    changed = [f"{f.name}={getattr(config, f.name)}" for f in fields(config)
               if f.default is not MISSING and getattr(config, f.name) != f.default]
    return f"{config.kind}({', '.join(changed)})" if changed else str(config.kind)


def _load_point(data: dict[str, Any], rep: int, base_dir: Path | None, where: str) -> Scenario:
    try:
        seed = data.get("seed", 0)
        if rep:
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise InputError("seed", f"expected an integer (repetitions add 0..k-1 to it), got {short_repr(seed)}")
            data = {**data, "seed": seed + rep}
        return scenario_from_data(data, base_dir=base_dir)
    except InputError as err:
        rep_text = f", repetition {rep}" if rep else ""
        raise InputError(f"point ({where}{rep_text}): {err.path}", err.message) from None


def read_sweep_file(path: str | Path) -> dict[str, Any]:
    """The sweep file's data (a one-line InputError if it is missing or not YAML)."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise InputError(str(path), "sweep file not found")
    check_yaml_size(p)
    try:
        data = parse_yaml(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise InputError(str(path), f"not a UTF-8 text file (byte {err.start}: {err.reason})") from None
    except OSError as err:
        raise InputError(str(path), f"cannot read the sweep file: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise InputError(str(path), yaml_error_text(err)) from None
    if not isinstance(data, dict):
        raise InputError(str(path), f"the top level must be a mapping (base:, factors:, ...), got {type(data).__name__}")
    return data


def load_sweep(path: str | Path, overrides: Sequence[str] = ()) -> Sweep:
    """Read and expand a sweep file; errors name the file and the key path (or the failing point)."""
    try:
        spec = parse_sweep(read_sweep_file(path))
        base_path = (Path(path).parent / spec.base).resolve()
        if not base_path.is_file():
            raise InputError("base", f"base scenario {spec.base} not found (looked for {base_path})")
        base = read_yaml(base_path)
        sweep = expand(spec, base, base_dir=base_path.parent, overrides=overrides)
    except InputError as err:
        if err.path.startswith(("--set", str(path))):
            raise
        raise InputError(f"{path}: {err.path}" if err.path else str(path), err.message) from None
    return sweep if sweep.name else Sweep(Path(path).name.split(".")[0], sweep.columns, sweep.repetitions, sweep.points)
