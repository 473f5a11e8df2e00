"""``lbsim whatif JOB``: the command line of :mod:`lbsim.whatif` (docs/whatif.md)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def add_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("job", help="a recorded job folder (job.json + rank-NNNNN.csv) or one generic CSV/Parquet file")
    sp.add_argument("--out", help="output folder (default: runs/<job folder name>/whatif)")
    sp.add_argument("--replace", action="store_true", help="write over an earlier result in the default output folder")
    sp.add_argument("-q", "--quiet", action="store_true", help="print no table")


def cmd_whatif(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from lbsim.recording import read_recording

    rec = read_recording(args.job)
    if not args.quiet:
        print(f"{rec.source}: {rec.ranks} ranks x {rec.steps_used} steps, {rec.job_s:.3f} s recorded")
        for note in rec.notes:
            print(note)
    return 0
