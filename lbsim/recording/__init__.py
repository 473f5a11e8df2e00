"""Recorded training jobs: the on-disk format, its torch-free reader and its checks.

A recording is one folder per job::

    JOB_DIR/
      job.json          the header: format, version, world_size, scheme, complete, gradient_bytes, ...
      rank-00000.csv    rank 0's shard: one row per step (or rank-00000.parquet)
      rank-00001.csv    ...

Each rank writes its own shard (:mod:`lbsim.runtime.ddp.recorder`); the columns
(:data:`lbsim.recording.schema.COLUMNS`) are, per rank and step: ``rank``, ``host``, ``device``,
``step``, ``samples``, ``tokens`` (optional), and four moments on the rank's clock in seconds since
the ranks' common start: ``batch_ready_s`` (the rank holds its batch), ``last_bucket_s`` (its last
gradient bucket is ready: the end of its own compute), ``step_end_s`` (the all-reduce of the last
bucket has completed) and ``optimizer_end_s`` (the optimizer step has returned).

A single CSV or Parquet file holding every rank's rows (the *generic* form, e.g. converted from
another tool's logs with pandas) is read the same way, without a header. :func:`read_recording`
returns a checked :class:`~lbsim.recording.schema.Recording`; every problem is an
:class:`~lbsim.errors.InputError` naming the file and the row. Nothing here imports torch or simpy.

Modules: :mod:`~lbsim.recording.schema` (columns, header keys, bounds, the Recording),
:mod:`~lbsim.recording.files` (a file as typed columns), :mod:`~lbsim.recording.checks` (row and
rank checks), :mod:`~lbsim.recording.reader` (a job folder or a generic file, a killed job),
:mod:`~lbsim.recording.writer` (the format written), :mod:`~lbsim.recording.synthetic` (a
closed-form recording for tests and examples).
"""

from lbsim.recording.reader import read_recording
from lbsim.recording.schema import COLUMNS, OPTIONAL_COLUMNS, Recording

__all__ = ["COLUMNS", "OPTIONAL_COLUMNS", "Recording", "read_recording"]
