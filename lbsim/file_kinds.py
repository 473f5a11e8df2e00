"""A sweep file given where a scenario is expected (``lbsim run sweep.yaml``), or the reverse.

Both are YAML mappings, so the loader's first complaint is an unknown key (``base`` for a
scenario, ``seed`` for a sweep). When loading fails, :func:`wrong_kind` looks at the file's
top-level keys and, if they are the other kind's, names the file's kind and the command that
takes it instead.
"""

from __future__ import annotations

from pathlib import Path

from lbsim.errors import InputError
from lbsim.limits import MAX_YAML_BYTES

SWEEP_KEYS = frozenset({"base", "factors", "zip", "repetitions"})
SCENARIO_KEYS = frozenset({"workload", "cluster", "network", "contention", "numerics", "data", "seed", "scheme"})


def _top_keys(path: str | Path) -> set[str] | None:
    p = Path(path)
    try:
        if not p.is_file() or p.stat().st_size > MAX_YAML_BYTES:
            return None
        import yaml

        data = yaml.load(p.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    except (OSError, UnicodeDecodeError, ValueError, Exception):  # noqa: BLE001 — the loader's own error stands
        return None
    return {str(k) for k in data} if isinstance(data, dict) else None


def wrong_kind(path: str | Path, expected: str, err: InputError) -> InputError:
    """``err``, or a clearer error if ``path`` is a sweep file where a scenario was ``expected`` (or the reverse)."""
    keys = _top_keys(path)
    if keys is None:
        return err
    if expected == "scenario" and keys & SWEEP_KEYS and not keys & (SCENARIO_KEYS - {"seed", "scheme"}):
        return InputError(str(path), f"a sweep file (its keys include {', '.join(sorted(keys & SWEEP_KEYS))}), not a scenario; "
                                     f"run it with `lbsim sweep {path}`")
    if expected == "sweep" and keys & (SCENARIO_KEYS - {"seed", "scheme"}) and not keys & SWEEP_KEYS:
        return InputError(str(path), f"a scenario file (its keys include {', '.join(sorted(keys & SCENARIO_KEYS))}), not a sweep; "
                                     f"run it with `lbsim run {path}`, or sweep it from a sweep file with `base: {path}` "
                                     "(docs/tutorial.md, section 10)")
    return err
