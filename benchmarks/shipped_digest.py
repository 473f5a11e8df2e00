"""A digest of every shipped scenario's simulated results, to compare two checkouts.

Run: ``python benchmarks/shipped_digest.py [TREE]`` (TREE: a checkout of the repository, default
this one), once per checkout, and compare the outputs (``diff``). For every ``scenarios/**/*.yaml``
but the sweep definitions (``scenarios/sweeps/``) and the 1,024-worker benchmark
(``scenarios/bench/``), it runs ``simulate`` as shipped and prints a SHA-256 over the iteration and
update records (every column's bytes, in column order) and the summary (its ``repr``), and the
run's worker-iterations. A change that claims to leave results
unchanged (an engine made faster, say) must leave every line unchanged. Each checkout runs in a
fresh process that imports that checkout's code only.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import hashlib, sys
from pathlib import Path
tree = Path({tree!r})
sys.path.insert(0, str(tree))
import lbsim
assert lbsim.__file__.startswith(str(tree)), lbsim.__file__
import numpy as np
from lbsim.scenario.loader import load_scenario
from lbsim.simulator.run import simulate
for path in sorted((tree / "scenarios").rglob("*.yaml")):
    rel = path.relative_to(tree / "scenarios")
    if rel.parts[0] in ("sweeps", "bench"):
        continue
    result = simulate(load_scenario(path))
    h = hashlib.sha256(repr(result.summary).encode())
    for table in (result.iterations, result.updates):
        for column in table.COLUMNS:
            h.update(column.encode())
            h.update(np.ascontiguousarray(table.column(column)).tobytes())
    print(f"{{rel}}  {{h.hexdigest()}}  {{len(result.iterations)}} worker-iterations", flush=True)
"""


def main(tree: str) -> None:
    root = str(Path(tree).resolve())
    out = subprocess.run([sys.executable, "-c", _CHILD.format(tree=root)], text=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"})
    if out.returncode:
        raise SystemExit(out.returncode)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parents[1]))
