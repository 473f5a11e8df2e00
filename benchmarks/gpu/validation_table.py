"""Print one ``lbsim validate`` folder's errors as a markdown table (single run or ``--repeats``).

    python benchmarks/gpu/validation_table.py DIR [DIR ...]

Columns: scheme, then per error (mean iteration time, throughput) the median over repeats and its
(min, max), as ``docs/runtime.md`` reports them. Reads ``DIR/validation.json`` only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

METRICS = ("mean_iteration_s", "throughput_samples_per_s")


def _cell(stat: Any) -> str:
    if stat is None:
        return "n/a"
    if isinstance(stat, dict):
        return f"{stat['median']:+.1%} ({stat['min']:+.1%}, {stat['max']:+.1%})"
    return f"{stat:+.1%}"


def table(folder: Path) -> str:
    report = json.loads((folder / "validation.json").read_text(encoding="utf-8"))
    repeats = report.get("repeats", 1)
    lines = [f"{folder.name}: {report.get('scenario', '')}, {repeats} repeat(s)",
             "| scheme | " + " | ".join(METRICS) + " |", "| --- |" + " --- |" * len(METRICS)]
    for name, entry in report["schemes"].items():
        errors = entry if repeats > 1 else entry.get("error", {})
        lines.append(f"| {name} | " + " | ".join(_cell(errors.get(m)) for m in METRICS) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        path = Path(arg)
        if (path / "validation.json").is_file():
            print(table(path))
        else:
            print(f"{path}: no validation.json")
