"""``--set dotted.key=value`` overrides, applied to the raw scenario data before parsing.

The value is parsed as YAML (``--set seed=3`` gives an int, ``--set contention=[]`` a list),
with the same safe loader as scenario files (:func:`parse_yaml`, which also rejects a key given
twice in one mapping). Path segments that are integers index lists
(``cluster.groups.0.count=4``); missing mapping keys are created.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import yaml

from lbsim.errors import InputError
from lbsim.limits import MAX_SET_CHARS, MAX_YAML_DEPTH, MAX_YAML_NODES, short_repr


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects a key given twice in one mapping (PyYAML keeps the last) and
    nesting deeper than ``MAX_YAML_DEPTH`` (checked while composing: PyYAML's composer recurses)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.path: list[str] = []  # where the composer is: mapping keys and list indices

    def compose_node(self, parent: Any, index: Any) -> Any:
        if isinstance(index, yaml.ScalarNode):  # a mapping's value, under this key
            segment = index.value if len(index.value) <= 40 else index.value[:37] + "..."
            self.path.append(f".{segment}" if any(self.path) else segment)
        else:  # a list item (an int) or a mapping key being read (None)
            self.path.append(f"[{index}]" if isinstance(index, int) else "")
        try:
            if len(self.path) > MAX_YAML_DEPTH + 1:  # the document itself is the first level
                mark = self.peek_event().start_mark
                where = "".join(self.path[:6]) + ("..." if len(self.path) > 6 else "")
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_YAML_DEPTH} levels deep under {where}", mark)
            return super().compose_node(parent, index)
        finally:
            self.path.pop()


def _strict_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, Any] = {}
    for key_node, _value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`; explicit keys may override merged ones
            continue
        if not isinstance(key_node, yaml.ScalarNode):
            continue  # a list or mapping as a key: PyYAML reports it as unhashable
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {short_repr(key)} (a key may appear once per mapping)", key_node.start_mark
            )
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _strict_mapping)
# YAML 1.2 floats: PyYAML (YAML 1.1) reads ``1e12`` and ``1.5e-3`` as strings -- a float needs a dot and a
# signed exponent there (``1.0e+12``). Scenario files and ``--set`` values take the forms users write.
YAML12_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
YAML12_FLOAT_FIRST = list("-+0123456789.")
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_FLOAT, YAML12_FLOAT_FIRST)


def yaml_error_text(err: yaml.YAMLError) -> str:
    """A one-line description of a YAML error: where (line, column) and what."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(err, "problem", None) or (str(err).splitlines() or ["unreadable"])[0]
    return f"invalid YAML{where}: {' '.join(str(problem).split())}"


def _expanded_nodes(root: yaml.Node) -> int:
    """Nodes in the document once every alias is expanded (memoised: linear in the distinct nodes).

    Raises ``yaml.YAMLError`` for an alias inside the node it refers to (an endless structure).
    """
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise yaml.composer.ComposerError(None, None, "an alias refers to a node that contains it "
                                              "(an endless structure)", node.start_mark)
        open_.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        open_.discard(key)
        sizes[key] = total
        return total

    return size(root)


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load`` that also rejects duplicate keys and oversized structures; raises ``yaml.YAMLError``.

    The document is composed (nesting checked on the way), its size after alias expansion counted
    (``MAX_YAML_NODES``), and only then constructed, so an anchor bomb costs what its text costs.
    The same text gives the same data, so a text read recently is not parsed again: the caller gets
    its own deep copy of the data kept (a text that fails is parsed, and fails, every time).
    """
    return copy.deepcopy(_parsed(text))


# The last texts parse_yaml read, and their data: the same scenario file and the same ``--set`` values are
# read again and again by a sweep, a comparison, advise and whatif (PyYAML's pure-Python parser: ~1 MB/s).
# lru_cache keeps no result for a call that raises.
_PARSED_TEXTS = 64


@lru_cache(maxsize=_PARSED_TEXTS)
def _parsed(text: str) -> Any:
    """:func:`_parse_yaml`'s data for ``text``, kept for the last texts read (never handed out itself)."""
    return _parse_yaml(text)


def _parse_yaml(text: str) -> Any:
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        nodes = _expanded_nodes(node)
        if nodes > MAX_YAML_NODES:
            raise yaml.composer.ComposerError(
                None, None, f"{nodes} values once aliases (*name) are expanded, more than the bound of {MAX_YAML_NODES}",
                None)
        return loader.construct_document(node)
    except (ValueError, RecursionError) as err:  # e.g. an integer of more than 4,300 digits
        raise yaml.YAMLError(f"a value cannot be read: {short_repr(str(err), 120)}") from None
    finally:
        loader.dispose()


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``a.b.0.c=value`` into its path segments and the YAML-parsed value."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if len(text) > MAX_SET_CHARS:
        raise InputError(f"--set {key if len(key) <= 40 else key[:37] + '...'}", f"{len(text)} characters, more than the bound of {MAX_SET_CHARS}")
    if not sep or not key or any(not part.strip() for part in key.split(".")):
        raise InputError("--set", f"expected KEY=VALUE with a dotted key (e.g. scheme.staleness=2), got {short_repr(text)}")
    try:
        value = parse_yaml(raw) if raw.strip() else None
    except yaml.YAMLError as err:
        raise InputError(f"--set {key}", f"value is not valid YAML ({yaml_error_text(err)}); quote it or fix it") from None
    return [part.strip() for part in key.split(".")], value


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """A deep copy of ``data`` with every ``KEY=VALUE`` override applied, in order."""
    out = copy.deepcopy(data)
    for text in overrides:
        parts, value = parse_override(text)
        node: Any = out
        for depth, part in enumerate(parts):
            where = ".".join(parts[: depth + 1])
            last = depth == len(parts) - 1
            if isinstance(node, list):
                if not part.isdigit():
                    raise InputError(f"--set {where}", f"{short_repr(part)} is not a list index; valid: 0..{len(node) - 1} (the list has {len(node)} items)")
                if int(part) >= len(node):
                    raise InputError(f"--set {where}", f"list index out of range; valid: 0..{len(node) - 1} (the list has {len(node)} items)")
                index: Any = int(part)
            elif isinstance(node, dict):
                index = part
            else:
                parent = ".".join(parts[:depth]) or "(top level)"
                raise InputError(f"--set {where}", f"{parent} is {type(node).__name__} {short_repr(node)}, not a mapping or list; it has no key {short_repr(part)}")
            if last:
                node[index] = value
            else:
                if isinstance(node, dict) and (index not in node or node[index] is None):
                    node[index] = {}
                node = node[index]
    return out
