"""``lbsim whatif JOB``: the command line of :mod:`lbsim.whatif` (docs/whatif.md)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path


def add_arguments(sp: argparse.ArgumentParser) -> None:
    """The command's arguments: the job, its scheme, the schemes to predict, the bootstrap, ``t0``, the output."""
    sp.add_argument("job", help="a recorded job folder (job.json + rank-NNNNN.csv) or one generic CSV/Parquet file")
    sp.add_argument("--scheme", help="the scheme a generic file's job ran (default: its job.json's, else bsp: plain DDP)")
    sp.add_argument("--schemes", help="comma-separated schemes to predict (default: every registered one; "
                                      "bsp over the all-reduce, plain DDP, is the baseline)")
    sp.add_argument("--bootstrap", type=int, default=20, metavar="N",
                    help="moving-block bootstrap replicates over steps for the speedup intervals (default 20; 0: none)")
    sp.add_argument("--t0-s", type=float, metavar="SECONDS",
                    help="fixed per-step compute of every rank whose batch never varied (a plain DDP job cannot show it; "
                         "e.g. lbsim profile-model's t0_s; default 0: compute proportional to the batch)")
    sp.add_argument("--out", help="output folder (default: runs/<job name>/whatif)")
    sp.add_argument("--replace", action="store_true", help="write over an earlier result in the default output folder")
    sp.add_argument("-q", "--quiet", action="store_true", help="print nothing")


def cmd_whatif(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run :func:`lbsim.whatif.run.whatif` into the chosen folder and print its summary; 0 on success."""
    from lbsim.lifecycle.guards import default_out, scheme_list
    from lbsim.run_folder import choose_out
    from lbsim.whatif.report import summary_lines
    from lbsim.whatif.run import whatif

    schemes = scheme_list(args.schemes, "--schemes") if args.schemes else None
    choice = choose_out(args.out, default_out(Path(args.job).name, "whatif"), replace=args.replace)
    args.out_choice = choice
    outcome = whatif(args.job, choice.path, scheme=args.scheme, schemes=schemes, bootstrap=args.bootstrap,
                     t0_s=args.t0_s, argv=["lbsim", *argv])
    if not args.quiet:
        for line in summary_lines(outcome):
            print(line)
        print(f"results in {choice.path}/ (scenario.yaml: the fitted job, editable; whatif.json; heatmap)")
    return 0
