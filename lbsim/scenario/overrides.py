"""``--set dotted.key=value`` overrides, applied to the raw scenario data before parsing.

The value is parsed with ``yaml.safe_load`` (``--set seed=3`` gives an int, ``--set
contention=[]`` a list). Path segments that are integers index lists
(``cluster.groups.0.count=4``); missing mapping keys are created.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import yaml

from lbsim.errors import InputError


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``a.b.0.c=value`` into its path segments and the YAML-parsed value."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise InputError("--set", f"expected KEY=VALUE with a dotted key, got {text!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as err:
        raise InputError(f"--set {key}", f"value is not valid YAML: {err}") from None
    return key.split("."), value


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
                if not part.isdigit() or int(part) >= len(node):
                    raise InputError(f"--set {where}", f"list index out of range (the list has {len(node)} items)")
                index: Any = int(part)
            elif isinstance(node, dict):
                index = part
            else:
                raise InputError(f"--set {where}", f"cannot index into {type(node).__name__} {node!r}")
            if last:
                node[index] = value
            else:
                if isinstance(node, dict) and (index not in node or node[index] is None):
                    node[index] = {}
                node = node[index]
    return out
