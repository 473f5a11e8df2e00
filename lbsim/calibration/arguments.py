"""The arguments of ``lbsim calibrate`` and ``lbsim calibrate-nccl``, apart from the commands.

The command line builds every command's parser at start-up; the fits themselves (numpy, the
model, the readers) are imported only when a calibration runs, so this module imports nothing but
:mod:`argparse`.
"""

from __future__ import annotations

import argparse

NCCL_NOMINAL = 0.9  # calibrate-nccl's default nominal coverage of a prediction's interval


def calibrate_arguments(sp: argparse.ArgumentParser) -> None:
    """``lbsim calibrate``'s arguments: the measurements, the fit placements, gradient bytes, output, instance, φ, noise."""
    sp.add_argument("measured", help="measured step times: CSV (placement, local_bsz, step_time[, sync_time]) "
                                     "or an `lbsim profile` profile.json")
    sp.add_argument("--fit-placements", required=True, metavar="P,P,...",
                    help="placements whose rows the links and overlap are fitted on, e.g. 2,4,11,22,1111 "
                         "(one digit per node: the GPUs used there)")
    sp.add_argument("--gradient-bytes", required=True, type=int, metavar="N", help="bytes all-reduced per step")
    sp.add_argument("--out", required=True, metavar="DIR", help="output directory: fit.yaml, predictions.csv")
    sp.add_argument("--gpus-per-node", type=int, metavar="K",
                    help="profile.json input only: ranks per node (default: all on one node)")
    sp.add_argument("--instance", help="catalog instance named in fit.yaml (default: the smallest GPU instance "
                                       "with room for the largest node; every figure is overridden anyway)")
    sp.add_argument("--chunk-share", type=float, default=None, metavar="PHI",
                    help="pipeline fill: the collective's chunk as a share of one call (default: NCCL's 512 KiB "
                         "step / DDP's 25 MiB bucket = 0.02; not fitted)")
    sp.add_argument("--jitter-cv", default=None, metavar="CV|fit|auto",
                    help="per-iteration compute noise (CV) of every GPU, which makes a step wait for the slowest "
                         "replica: `auto` (default) fits it and keeps it only where leave-one-placement-out "
                         "cross-validation on the fit placements supports it; `fit` always fits it; a value >= 0 "
                         "fixes it (0: none)")
    sp.add_argument("-q", "--quiet", action="store_true", help="print no table")


def calibrate_nccl_arguments(sp: argparse.ArgumentParser) -> None:
    """``lbsim calibrate-nccl``'s arguments: the logs, the fit node counts, the output folder, NICs per node, the interval."""
    sp.add_argument("logs", nargs="+", metavar="LOG", help="nccl-tests all_reduce_perf outputs, one run per file")
    sp.add_argument("--fit-nodes", required=True, metavar="N,N,...",
                    help="node counts whose rows the figures are fitted on, e.g. 1,2 (must include 1 and one >= 2); "
                         "the other rows are held out")
    sp.add_argument("--out", required=True, metavar="DIR", help="output directory: fit.yaml, predictions.csv, "
                                                                 "report.md, scenario.yaml")
    sp.add_argument("--nics-per-node", type=int, metavar="K",
                    help="network links per node, one per NCCL channel (default: the GPUs per node of the "
                         "multi-node fit logs: one NIC per GPU)")
    sp.add_argument("--interval", type=float, default=NCCL_NOMINAL, metavar="P",
                    help="nominal coverage of each prediction's interval, in (0, 1) (default 0.9; from the fit's "
                         "leave-one-GPU-count-out errors)")
    sp.add_argument("-q", "--quiet", action="store_true", help="print no table")
