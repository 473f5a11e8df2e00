"""The unknowns a user did not pin down, varied explicitly: ``--vary KEY=v1,v2,...`` and ``--colocated``.

An :class:`Unknown` is one scenario key path and the values it may take, each with a label. The
variants of an advice are the cross product of its unknowns (the first varies slowest); every
variant is a list of ``KEY=VALUE`` overrides applied to the base scenario exactly as ``--set``
applies them (:func:`lbsim.scenario.overrides.apply_overrides`), so a key that does not exist is
reported with its key path, as everywhere else.

``--vary KEY=v1,v2,...`` splits the values at the commas that are not inside brackets, braces or
quotes (``--vary contention.0.workers=[0],[4]``), and reads each as YAML (as ``--set`` does).

``--colocated "slowdown=2 on 1 node"`` adds a co-located job: a ``scheduled`` contention entry
(``slowdown`` times slower, ``target`` compute by default, from ``start_s`` 0 to ``end_s`` never)
on the workers of some nodes. Grammar::

    colocated := (KEY=VALUE)* "on" where      # KEY: slowdown, target, start_s, end_s
    where     := N "node"["s"] | "node"["s"] I[,J...] | "all"

``on node 3`` pins the node. ``on 1 node`` leaves it unknown: the report varies it over one node
of each group (a group's nodes are identical hardware on identical links, so its first node stands
for all of them; with ``N`` nodes, every way of taking ``N`` from the groups), and says whether
the answer depends on which node it is.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from lbsim.errors import InputError
from lbsim.limits import MAX_SET_CHARS, MAX_SWEEP_RUNS, short_repr
from lbsim.scenario.overrides import parse_override, parse_yaml, yaml_error_text
from lbsim.workers import WorkerSpec


@dataclass(frozen=True)
class Unknown:
    """A key path and its candidate values, with a label each (what the report prints)."""

    key: str
    labels: tuple[str, ...]
    values: tuple[Any, ...]
    source: str = "--vary"  # where it came from: --vary or --colocated
    title: str = ""  # how the report names it (default: the key)

    @property
    def name(self) -> str:
        """The unknown's name in the report."""
        return self.title or self.key

    def override(self, i: int) -> str:
        """The ``--set`` override that gives this unknown its ``i``-th value."""
        return f"{self.key}={json.dumps(self.values[i])}"


@dataclass(frozen=True)
class Variant:
    """One combination of the unknowns' values: its label per key, and the overrides that make it."""

    index: int
    labels: tuple[tuple[str, str], ...]  # (the unknown's name, this value's label) per unknown
    overrides: tuple[str, ...]

    @property
    def label(self) -> str:
        """The variant in words: each varied unknown with its value."""
        return ", ".join(f"{k}: {v}" for k, v in self.labels) or "as given"

    @property
    def short(self) -> str:
        """The values alone (``node 0 (V100)``), or the full label with several unknowns."""
        return self.labels[0][1] if len(self.labels) == 1 else self.label


def split_values(text: str) -> list[str]:
    """Split at the commas outside brackets, braces and quotes."""
    out, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [p.strip() for p in out]


def parse_vary(text: str) -> Unknown:
    """``KEY=v1,v2,...`` as an :class:`Unknown`; InputError naming ``--vary`` and the key."""
    if len(text) > MAX_SET_CHARS:
        raise InputError("--vary", f"{len(text)} characters, more than the bound of {MAX_SET_CHARS}")
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not raw.strip():
        raise InputError("--vary", f"expected KEY=v1,v2,... with a dotted key (e.g. network.bandwidth_gbps=5,10), "
                                   f"got {short_repr(text)}")
    try:
        parts, _ = parse_override(f"{key}=null")
    except InputError as err:
        raise InputError(err.path.replace("--set", "--vary", 1), err.message) from None
    labels = split_values(raw)
    if any(not v for v in labels):
        raise InputError(f"--vary {key}", f"an empty value in {short_repr(raw)}")
    if len(set(labels)) != len(labels):
        raise InputError(f"--vary {key}", f"a value is listed twice in {short_repr(raw)}")
    values = []
    for label in labels:
        try:
            values.append(parse_yaml(label))
        except yaml.YAMLError as err:
            raise InputError(f"--vary {key}", f"value {short_repr(label)} is not valid YAML ({yaml_error_text(err)})") from None
    return Unknown(".".join(parts), tuple(labels), tuple(values))


@dataclass(frozen=True)
class Colocated:
    """A co-located job: ``slowdown`` on ``target`` of some nodes (``nodes`` pinned, else ``count`` unknown ones)."""

    slowdown: float
    target: str = "compute"
    start_s: float = 0.0
    end_s: float | None = None
    count: int = 1
    nodes: tuple[int, ...] | None = None  # pinned node indices; None: count unknown nodes
    everywhere: bool = False

    def entry(self, workers: Sequence[int] | str) -> dict[str, Any]:
        """The scheduled contention entry this co-located job puts on ``workers``."""
        e: dict[str, Any] = {"name": "scheduled", "workers": workers if isinstance(workers, str) else list(workers),
                             "slowdown": self.slowdown, "target": self.target, "start_s": self.start_s}
        if self.end_s is not None:
            e["end_s"] = self.end_s
        return e


_COLOCATED_HELP = 'expected e.g. "slowdown=2 on 1 node", "slowdown=3 target=both on node 2" or "slowdown=1.5 on all"'


def parse_colocated(text: str) -> Colocated:
    """``slowdown=2 on 1 node`` as a :class:`Colocated`; InputError naming ``--colocated``."""
    if len(text) > MAX_SET_CHARS:
        raise InputError("--colocated", f"{len(text)} characters, more than the bound of {MAX_SET_CHARS}")
    head, sep, where = text.partition(" on ")
    if not sep:
        raise InputError("--colocated", f"no ' on ' in {short_repr(text)}; {_COLOCATED_HELP}")
    settings: dict[str, str] = {}
    for token in head.split():
        k, eq, v = token.partition("=")
        if not eq or k not in ("slowdown", "target", "start_s", "end_s"):
            raise InputError("--colocated", f"cannot read {short_repr(token)}; keys: slowdown, target, start_s, end_s; "
                                            f"{_COLOCATED_HELP}")
        settings[k] = v
    if "slowdown" not in settings:
        raise InputError("--colocated", f"give slowdown=F (2: the job runs half as fast); {_COLOCATED_HELP}")

    def number(k: str) -> float:
        try:
            return float(settings[k])
        except ValueError:
            raise InputError(f"--colocated {k}", f"expected a number, got {short_repr(settings[k])}") from None

    slowdown = number("slowdown")
    if not slowdown >= 1.0:
        raise InputError("--colocated slowdown", f"expected a factor >= 1 (2: twice as slow), got {settings['slowdown']}")
    target = settings.get("target", "compute")
    if target not in ("compute", "network", "both"):
        raise InputError("--colocated target", f"unknown {short_repr(target)}; valid: compute, network, both")
    start = number("start_s") if "start_s" in settings else 0.0
    end = number("end_s") if "end_s" in settings else None
    words = where.replace(",", " , ").split()
    if words == ["all"]:
        return Colocated(slowdown, target, start, end, everywhere=True)
    if len(words) == 2 and words[0].isdigit() and words[1] in ("node", "nodes"):
        count = int(words[0])
        if count < 1:
            raise InputError("--colocated", "the number of nodes must be >= 1")
        return Colocated(slowdown, target, start, end, count=count)
    if words and words[0] in ("node", "nodes"):
        ids = [w for w in words[1:] if w != ","]
        if ids and all(w.isdigit() for w in ids):
            nodes = tuple(sorted({int(w) for w in ids}))
            return Colocated(slowdown, target, start, end, count=len(nodes), nodes=nodes)
    raise InputError("--colocated", f"cannot read where {short_repr(where)}; {_COLOCATED_HELP}")


@dataclass(frozen=True)
class Node:
    index: int
    group: int
    instance: str
    workers: tuple[int, ...]


def nodes_of(workers: Sequence[WorkerSpec]) -> list[Node]:
    """The scenario's nodes, in node order, with their workers."""
    by_node: dict[int, list[WorkerSpec]] = {}
    for w in workers:
        by_node.setdefault(w.node, []).append(w)
    return [Node(n, ws[0].group, ws[0].instance, tuple(w.index for w in ws)) for n, ws in sorted(by_node.items())]


def colocated_plan(colocated: Colocated, workers: Sequence[WorkerSpec], index: int,
                   names: dict[str, str] | None = None) -> tuple[dict[str, Any], Unknown | None]:
    """The contention entry to append (at ``contention[index]``) and, for unpinned nodes, the unknown
    that varies them. ``names`` maps an instance to the name the user wrote (V100)."""
    nodes = nodes_of(workers)
    if colocated.everywhere:
        return colocated.entry("all"), None
    name = (names or {}).get

    def label(chosen: Sequence[Node]) -> str:
        kinds = ", ".join(name(n.instance) or n.instance for n in chosen)
        return f"node{'s' if len(chosen) > 1 else ''} {', '.join(str(n.index) for n in chosen)} ({kinds})"

    if colocated.nodes is not None:
        bad = [i for i in colocated.nodes if i >= len(nodes)]
        if bad:
            raise InputError("--colocated", f"node {bad[0]} does not exist; valid: 0..{len(nodes) - 1} "
                                            f"({len(nodes)} nodes)")
        chosen = [nodes[i] for i in colocated.nodes]
        return colocated.entry([w for n in chosen for w in n.workers]), None
    if colocated.count > len(nodes):
        raise InputError("--colocated", f"{colocated.count} nodes, but the cluster has {len(nodes)}")
    groups: dict[int, list[Node]] = {}
    for n in nodes:
        groups.setdefault(n.group, []).append(n)
    choices = []
    for combo in itertools.combinations_with_replacement(sorted(groups), colocated.count):
        taken = [groups[g][: combo.count(g)] for g in sorted(set(combo))]
        if all(len(t) == combo.count(g) for t, g in zip(taken, sorted(set(combo)), strict=True)):
            chosen = [n for t in taken for n in t]
            choices.append((label(chosen), [w for n in chosen for w in n.workers]))
    if len(choices) > MAX_SWEEP_RUNS:
        raise InputError("--colocated", f"{len(choices)} ways to place the job, more than the bound of {MAX_SWEEP_RUNS}")
    key = f"contention.{index}.workers"
    if len(choices) == 1:
        return colocated.entry(choices[0][1]), None
    return colocated.entry(choices[0][1]), Unknown(key, tuple(c[0] for c in choices), tuple(c[1] for c in choices),
                                                   source="--colocated", title="where the co-located job runs")


def variants(unknowns: Sequence[Unknown]) -> list[Variant]:
    """The cross product of the unknowns (the first varies slowest); one empty variant without any."""
    keys = [u.key for u in unknowns]
    for k in keys:
        if keys.count(k) > 1:
            raise InputError(f"--vary {k}", "the key is varied twice; give all its values in one --vary")
    out = []
    for i, pick in enumerate(itertools.product(*(range(len(u.values)) for u in unknowns))):
        out.append(Variant(i, tuple((u.name, u.labels[j]) for u, j in zip(unknowns, pick, strict=True)),
                           tuple(u.override(j) for u, j in zip(unknowns, pick, strict=True))))
    return out
