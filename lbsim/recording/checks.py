"""The checks on a recording's rows: each row on its own, and a rank's consecutive rows.

Bounds from :mod:`lbsim.recording.schema`: samples in ``[1, MAX_SAMPLES]``, times in
``[0, MAX_CLOCK_S]`` in the order batch ready <= last bucket <= step end <= optimizer end, a step
of at most ``MAX_STEP_S``; per rank one host and device, consecutive steps, no overlapping steps.
"""

from __future__ import annotations

import numpy as np

from lbsim.limits import short_repr
from lbsim.recording.files import Table
from lbsim.recording.schema import CLOCK_TOLERANCE_S, MAX_CLOCK_S, MAX_SAMPLES, MAX_STEP_S, TIME_COLUMNS


def first_index(mask: np.ndarray) -> int | None:
    """The first True position of ``mask`` (None: none), the row a check reports."""
    idx = np.flatnonzero(mask)
    return int(idx[0]) if len(idx) else None


def check_rows(t: Table) -> None:
    """Values each row must hold on its own, and the order of a rank's consecutive rows."""
    c = t.cols
    if (i := first_index(c["rank"] < 0)) is not None:
        raise t.error(i, f"rank must be >= 0, got {c['rank'][i]}")
    if (i := first_index((c["samples"] < 1) | (c["samples"] > MAX_SAMPLES))) is not None:
        raise t.error(i, f"samples must lie in [1, {MAX_SAMPLES}], got {c['samples'][i]}")
    if c["tokens"] is not None and (i := first_index(c["tokens"] < 0)) is not None:
        raise t.error(i, f"tokens must be >= 0, got {c['tokens'][i]}")
    if (i := first_index(c["step"] < 0)) is not None:
        raise t.error(i, f"step must be >= 0, got {c['step'][i]}")
    for col in TIME_COLUMNS:
        v = c[col]
        if (i := first_index((v < 0) | (v > MAX_CLOCK_S))) is not None:
            raise t.error(i, f"{col} = {v[i]:g} s is not seconds since the job's start (must lie in [0, {MAX_CLOCK_S:g}]): "
                             "check the unit and the clock's origin")
    for a, b in zip(TIME_COLUMNS, TIME_COLUMNS[1:], strict=False):
        if (i := first_index(c[b] < c[a] - CLOCK_TOLERANCE_S)) is not None:
            raise t.error(i, f"{b} ({c[b][i]:g} s) is before {a} ({c[a][i]:g} s)")
    span = c["optimizer_end_s"] - c["batch_ready_s"]
    if (i := first_index(span > MAX_STEP_S)) is not None:
        raise t.error(i, f"a step of {span[i]:g} s (batch_ready_s to optimizer_end_s), more than {MAX_STEP_S:g} s: check the unit")


def check_rank_order(t: Table, idx: np.ndarray) -> None:
    """One rank's rows (``idx``, in file order): one host and device, steps consecutive, time forward."""
    c = t.cols
    hosts = {c["host"][i] for i in idx}
    devices = {c["device"][i] for i in idx}
    for col, values in (("host", hosts), ("device", devices)):
        if len(values) > 1:
            i = next(i for i in idx if c[col][i] != c[col][idx[0]])
            raise t.error(int(i), f"{col} {short_repr(c[col][i])} differs from this rank's first row's "
                                  f"{short_repr(c[col][idx[0]])}: one rank runs on one {col}")
    steps = c["step"][idx]
    bad = np.flatnonzero(np.diff(steps) != 1)
    if len(bad):
        j = int(idx[bad[0] + 1])
        raise t.error(j, f"steps out of order: step {int(c['step'][j])} follows step {int(steps[bad[0]])} of rank "
                         f"{int(c['rank'][j])} (expected {int(steps[bad[0]]) + 1})")
    back = np.flatnonzero(c["batch_ready_s"][idx][1:] < c["optimizer_end_s"][idx][:-1] - CLOCK_TOLERANCE_S)
    if len(back):
        j = int(idx[back[0] + 1])
        raise t.error(j, f"batch_ready_s ({c['batch_ready_s'][j]:g} s) is before the previous step's optimizer_end_s "
                         f"({c['optimizer_end_s'][idx[back[0]]]:g} s): a rank's steps do not overlap")
