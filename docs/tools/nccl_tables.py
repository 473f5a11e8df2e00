"""Regenerate the nccl-tests tables of ``docs/validation.md`` and ``docs/collectives.md``.

    python docs/tools/nccl_tables.py            # rewrite the two blocks
    python docs/tools/nccl_tables.py --check    # write nothing; exit 1 when a page is out of date

The blocks are computed by :mod:`lbsim.calibration.nccl_tables` from the shipped A100 logs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lbsim.calibration.nccl_tables import documents


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python docs/tools/nccl_tables.py", description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/nccl_tests_a100", help="folder of nccl_<N>gpus.log files")
    ap.add_argument("--docs", default="docs", help="folder holding validation.md and collectives.md")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a document is out of date")
    args = ap.parse_args(argv)
    stale = []
    for path, new in documents(Path(args.data), Path(args.docs)).items():
        if new != path.read_text(encoding="utf-8"):
            stale.append(str(path))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"out of date: {', '.join(stale)} (python docs/tools/nccl_tables.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
