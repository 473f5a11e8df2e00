"""Sweeps: expand a base scenario by factors into resolved runs, run them in a pool, resume.

* :mod:`~lbsim.sweep.spec` — the sweep file's format and its validation.
* :mod:`~lbsim.sweep.expand` — pure expansion into points, each with a content hash.
* :mod:`~lbsim.sweep.runner` — run folders written atomically, ``results.csv`` streamed, resume.
* :mod:`~lbsim.sweep.backends` — a local process pool or a Dask cluster.
"""

from lbsim.sweep.expand import Sweep, SweepPoint, expand, load_sweep, run_id
from lbsim.sweep.spec import SweepSpec, parse_sweep

__all__ = ["Sweep", "SweepPoint", "SweepSpec", "expand", "load_sweep", "parse_sweep", "run_id"]
