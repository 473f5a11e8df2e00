"""Regenerate the Pollux tables of ``docs/validation.md`` (everything below ``<!-- generated -->``).

    python docs/tools/validation_tables.py --data data/pollux_t4 --out runs/validation

Runs ``lbsim calibrate`` on each model's placements file, fits the two baselines and the
robustness subsets, and rewrites the generated part of the page; the tables themselves are
computed by :mod:`lbsim.calibration.report`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lbsim.calibration.report import ALT_SUBSETS, MODELS, document_text, robustness, run_model
from lbsim.calibration.select import AUTO, JitterChoice


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python docs/tools/validation_tables.py", description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/pollux_t4", help="folder of the Pollux <model>_placements.csv files")
    ap.add_argument("--out", default="runs/validation", help="where each model's calibrate output goes")
    ap.add_argument("--doc", default="docs/validation.md", help="document whose generated part is replaced")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    ap.add_argument("--jitter-cv", default=AUTO, help="lbsim calibrate --jitter-cv (`auto`: kept where cross-validation "
                                                      "on the fit placements supports it; `fit`: always fitted; a CV)")
    args = ap.parse_args(argv)
    data = Path(args.data)
    if not data.is_dir():
        print(f"lbsim: error: --data: {data} is not a folder", file=sys.stderr)
        return 2
    models = args.models.split(",")
    results = [run_model(m, data, Path(args.out), args.jitter_cv) for m in models]
    cv: JitterChoice = AUTO if args.jitter_cv == AUTO else None if args.jitter_cv == "fit" else float(args.jitter_cv)
    robust = sorted((r for m in models for r in robustness(m, data, jitter_cv=cv)),
                    key=lambda r: ALT_SUBSETS.index(r.subset))
    doc = Path(args.doc)
    doc.write_text(document_text(doc.read_text(encoding="utf-8") if doc.exists() else None, results, robust),
                   encoding="utf-8")
    print(f"wrote {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
