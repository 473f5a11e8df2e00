"""Argument declarations shared by the ``lbsim`` command line and the runtime's rank entry point.

``lbsim train`` (:mod:`lbsim.cli`) and ``torchrun -m lbsim.runtime.worker`` take the same arguments; both
build them here, so neither engine imports the CLI (the CLI imports the engines inside its
commands). :class:`OneLineParser` reports a usage error as the product contract asks (docs/references.md §9): one line on stderr,
exit code 2, no usage dump.
"""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse with the product's error style (docs/references.md §9): one line on stderr, exit code 2, no usage dump."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        """Exit 2 with the message on one line and a pointer to ``--help``."""
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see `{self.prog} --help`)\n")


def one_line(text: object) -> str:
    """``text`` with every run of white space as one space."""
    return " ".join(str(text).split())


def scenario_arguments(sp: argparse.ArgumentParser) -> None:
    """A scenario file, its ``--set`` overrides, the output folder and ``--quiet``."""
    sp.add_argument("scenario", help="scenario YAML file")
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a scenario key, e.g. --set scheme.staleness=2 (repeatable)")
    sp.add_argument("--out", help="output directory (default: runs/<scenario>/<scheme or compare>; if that holds an "
                                  "earlier run, it is kept and this one goes to <default>-2, -3, ...)")
    sp.add_argument("--replace", action="store_true",
                    help="write over an earlier run in the default output directory instead of a fresh <default>-N")
    sp.add_argument("-q", "--quiet", action="store_true", help="print no table")


def runtime_arguments(sp: argparse.ArgumentParser) -> None:
    """The scenario arguments plus how this machine runs it (``lbsim.runtime.config.RuntimeOptions``)."""
    scenario_arguments(sp)
    sp.add_argument("--nproc", type=int, help="processes, one per worker plus one for a parameter-server scheme's server (default: what the scenario needs)")
    sp.add_argument("--backend", choices=("gloo", "nccl"), help="torch.distributed backend (default gloo; nccl: one GPU per rank)")
    sp.add_argument("--device", choices=("cpu", "cuda"),
                    help="where ranks compute (default: cuda with nccl, cpu with gloo); gloo + cuda: ranks share the "
                         "GPUs round-robin, collectives go through host memory")
    sp.add_argument("--contention", choices=("emulated", "real"),
                    help="emulated (default): stretch each step by the scenario's slowdown; real: a co-located CPU burner")
    sp.add_argument("--threads", type=int, help="torch threads per rank (default 1)")
    sp.add_argument("--affinity", choices=("auto", "none", "core"),
                    help="pin each rank to its own core(s): core; auto (default) pins only with --contention real")
    sp.add_argument("--model", help="softmax or mlp (default: the numerics defaults)")
    sp.add_argument("--hidden", type=int, help="MLP hidden units")
    sp.add_argument("--lr", type=float, help="SGD learning rate")
    sp.add_argument("--dtype", choices=("float32", "float64"), help="parameter and gradient dtype (default float32)")
    sp.add_argument("--timeout-s", type=float, dest="timeout_s", help="collective timeout: a crashed or hung rank ends the run (default 60)")


def train_arguments(sp: argparse.ArgumentParser) -> None:
    """``lbsim train``'s arguments (also those of ``torchrun -m lbsim.runtime.worker``)."""
    runtime_arguments(sp)
    sp.add_argument("--scheme", help="scheme name, replacing the file's (see `lbsim schemes`)")


def train_parser(prog: str = "lbsim train") -> argparse.ArgumentParser:
    """A parser of ``lbsim train``'s arguments alone (a rank started by torchrun parses its own)."""
    p = OneLineParser(prog=prog)
    train_arguments(p)
    return p
