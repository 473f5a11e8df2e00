"""Typed, frozen configuration loaded from plain YAML data, with key-path errors.

Every configuration section in lbsim is a frozen dataclass whose fields are declared with
:func:`param`: the default, a one-line help text and simple bounds live beside the field, in
one place. :func:`parse` turns a mapping (from YAML) into such a dataclass, checking types,
bounds and unknown keys, and raises :class:`~lbsim.errors.InputError` naming the exact key path
(``cluster.groups[1].count``) and what is allowed. :func:`to_data` goes back to plain data, so
a resolved scenario can be written out and loaded again to the same value.

Polymorphic sections (``scheme: {name: ssp, staleness: 3}``) are fields whose metadata carries a
*registry*: a mapping from ``name`` to the dataclass that holds that variant's parameters.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from lbsim.errors import InputError
from lbsim.limits import MAX_LIST_ITEMS, short_repr

T = TypeVar("T")
MISSING = dataclasses.MISSING

Registry = Callable[[], Mapping[str, type]]


def param(
    default: Any = MISSING,
    help: str = "",
    *,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    registry: Registry | None = None,
    nonempty: bool = False,
) -> Any:
    """Declare a config field: its default, help text and bounds (``gt``, ``ge``, ``le``).

    ``registry`` marks a polymorphic field: a callable returning ``{name: dataclass}``.
    Tuple defaults are immutable, so they are safe as plain defaults.
    """
    meta = {"help": help, "gt": gt, "ge": ge, "le": le, "registry": registry, "nonempty": nonempty}
    if default is MISSING:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _key_text(key: Any) -> str:
    """A mapping key as it appears in a key path: plain if it is a simple word, else its repr."""
    if isinstance(key, str) and key and len(key) <= 60 and key.isprintable() and not any(c.isspace() for c in key):
        return key
    return short_repr(key)


def _did_you_mean(word: Any, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for a close match among ``choices``, else an empty string."""
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _describe(value: Any) -> str:
    return f"{short_repr(value)} ({type(value).__name__})"


def _type_name(tp: Any) -> str:
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is bool:
        return "true or false"
    if tp is str:
        return "a string"
    if tp is type(None):
        return "null"
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin is tuple:
        return "a list"
    if origin in (Union, types.UnionType):
        return " or ".join(dict.fromkeys(_type_name(a) for a in get_args(tp)))  # each kind once (variants: a mapping)
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return str(tp)


def _convert(tp: Any, value: Any, path: str, meta: Mapping[str, Any]) -> Any:
    """Convert plain data ``value`` to type ``tp`` or raise InputError at ``path``."""
    registry = meta.get("registry")
    origin = get_origin(tp)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise InputError(path, f"expected a list, got {_describe(value)}")
        (item_tp, _ellipsis) = get_args(tp)
        if meta.get("nonempty") and not value:
            raise InputError(path, "must not be empty")
        if len(value) > MAX_LIST_ITEMS:
            raise InputError(path, f"a list of {len(value)} items is longer than the bound of {MAX_LIST_ITEMS}")
        item_meta = {"registry": registry}
        return tuple(_convert(item_tp, v, _join(path, i), item_meta) for i, v in enumerate(value))
    if registry is not None:
        return parse_variant(registry(), value, path)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for alt in args:
            if alt is type(None):
                continue
            try:
                return _convert(alt, value, path, meta)
            except InputError as err:
                errors.append(err)
        if len(errors) == 1:
            raise errors[0]
        # An alternative that got past the value's outer shape (e.g. a list whose item is wrong)
        # failed deeper than ``path``; its message is the specific one.
        deepest = max(errors, key=lambda e: len(e.path))
        if len(deepest.path) > len(path):
            raise deepest
        if isinstance(value, (list, tuple)):  # the list alternative's own complaint (e.g. empty)
            for alt, alt_err in zip((a for a in args if a is not type(None)), errors, strict=False):
                if get_origin(alt) is tuple:
                    raise alt_err
        raise InputError(path, f"expected {_type_name(tp)}, got {_describe(value)}")
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed or isinstance(value, bool) != any(isinstance(a, bool) for a in allowed):
            raise InputError(path, f"{short_repr(value)} is not allowed; valid: {', '.join(map(str, allowed))}")
        return value
    if dataclasses.is_dataclass(tp):
        return parse(typing.cast(type, tp), value, path)
    if tp is bool:
        if not isinstance(value, bool):
            raise InputError(path, f"expected true or false, got {_describe(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return _bounded(int(value), path, meta)
            raise InputError(path, f"expected an integer, got {_describe(value)}")
        return _bounded(value, path, meta)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(path, f"expected a number, got {_describe(value)}")
        f = float(value)
        if f != f or f in (float("inf"), float("-inf")):
            raise InputError(path, f"expected a finite number, got {short_repr(value)}")
        return _bounded(f, path, meta)
    if tp is str:
        if not isinstance(value, str):
            raise InputError(path, f"expected a string, got {_describe(value)}")
        if meta.get("nonempty") and not value:
            raise InputError(path, "must not be empty")
        return value
    raise TypeError(f"unsupported config type {tp!r} at {path}")  # programming error


def _bounded(value: float, path: str, meta: Mapping[str, Any]) -> Any:
    gt, ge, le = meta.get("gt"), meta.get("ge"), meta.get("le")
    if gt is not None and not value > gt:
        raise InputError(path, f"must be > {gt:g}, got {value!r}")
    if ge is not None and not value >= ge:
        raise InputError(path, f"must be >= {ge:g}, got {value!r}")
    if le is not None and not value <= le:
        raise InputError(path, f"must be <= {le:g}, got {value!r}")
    return value


_FIELDS: dict[type, tuple[dict[str, Any], dict[str, dataclasses.Field[Any]]]] = {}


def _init_fields(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]]]:
    """``cls``'s resolved type hints and its ``__init__`` fields by name, resolved once per class
    (resolving the hints is most of the cost of parsing a small mapping; a class's hints do not change)."""
    got = _FIELDS.get(cls)
    if got is None:
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
        got = _FIELDS[cls] = (typing.get_type_hints(cls), fields)
    return got


def parse(cls: type[T], data: Any, path: str = "") -> T:
    """Build dataclass ``cls`` from mapping ``data``; unknown keys and bad values are errors."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise InputError(path, f"expected a mapping of keys, got {_describe(data)}")
    hints, fields = _init_fields(cls)
    for key in data:
        if key not in fields:
            valid = ", ".join(sorted(fields)) or "(none)"
            raise InputError(_join(path, _key_text(key)), f"unknown key{_did_you_mean(key, fields)}; valid keys here: {valid}")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = _convert(hints[name], data[name], _join(path, name), f.metadata)
        elif f.default is MISSING and f.default_factory is MISSING:
            raise InputError(_join(path, name), f"required key is missing ({f.metadata.get('help', '')})")
    obj = cls(**kwargs)
    check = getattr(obj, "check", None)
    if check is not None:
        try:
            check()
        except InputError as err:
            raise err.under(path) from None
    return obj


def parse_variant(registry: Mapping[str, type], data: Any, path: str) -> Any:
    """Parse a polymorphic section: ``data['name']`` picks the dataclass from ``registry``."""
    valid = ", ".join(sorted(registry))
    if isinstance(data, str):
        data = {"name": data}
    if not isinstance(data, Mapping):
        raise InputError(path, f"expected a mapping with a 'name' key ({valid}), got {_describe(data)}")
    name = data.get("name")
    if name is None:
        raise InputError(_join(path, "name"), f"required key is missing; valid: {valid}")
    if not isinstance(name, str) or name not in registry:
        raise InputError(_join(path, "name"), f"unknown {short_repr(name)}{_did_you_mean(name, registry)}; valid: {valid}")
    rest = {k: v for k, v in data.items() if k != "name"}
    return parse(registry[name], rest, path)


def variant_name(obj: Any) -> str | None:
    """The registry name of a polymorphic config object (its ``kind`` class attribute)."""
    return getattr(type(obj), "kind", None)


def to_data(obj: Any) -> Any:
    """Plain (YAML-safe) data for a config object; polymorphic objects include ``name``."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        kind = variant_name(obj)
        if kind is not None:
            out["name"] = kind
        for f in dataclasses.fields(obj):
            if f.init:
                out[f.name] = to_data(getattr(obj, f.name))
        return out
    if isinstance(obj, tuple):
        return [to_data(v) for v in obj]
    return obj


def help_rows(cls: type, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key, type, default, help) for every field of ``cls``, for generated reference docs."""
    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        default = "(required)" if f.default is MISSING else repr(to_data(f.default))
        rows.append((prefix + f.name, _type_name(hints[f.name]), default, f.metadata.get("help", "")))
    return rows
