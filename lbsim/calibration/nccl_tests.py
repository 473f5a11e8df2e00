"""Reading nccl-tests ``all_reduce_perf`` logs: one :class:`NcclRow` per message size.

Format (NVIDIA nccl-tests text output): ``#`` lines are headers; ``#  Rank r Pid p on HOST device d
[...]`` lines place each rank on a node; every other non-blank line is a data row of 12 or 13 fields::

    size(B) count type redop  time(us) algbw busbw error  time(us) algbw busbw error

the first group for the out-of-place run, the second for the in-place run (``#wrong`` may be
``N/A``; newer nccl-tests add a ``root`` column after ``redop``: 13 fields). Logs written through MPI carry a ``[a,b]<stdout>:`` prefix on every line, and
interleaved output can put one in the middle of a line: every such tag is removed first.

A row's time is ``min(out-of-place, in-place)``: the two are the same collective on the same
buffers, measured back to back, so their difference is interference (the first row of a
multi-node run can be a warm-up outlier 13x the other). The number of GPUs is the number of
``Rank`` lines and the number of nodes the number of distinct hosts; a log without ``Rank`` lines
(``nThread 1 nGpus g``) is one node of ``g`` GPUs. Every node must hold the same number of ranks.

Bounds: a file is refused above :data:`~lbsim.limits.MAX_MEASURED_BYTES` before it is read, and
rows above :data:`~lbsim.limits.MAX_MEASURED_ROWS` in all. Any malformed line is an
:class:`~lbsim.errors.InputError` naming ``file:line`` (exit 2).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lbsim.calibration.measured import read_measured_text
from lbsim.errors import InputError
from lbsim.limits import MAX_MEASURED_ROWS, MAX_WORKERS, short_repr

_MPI_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)")
_GPUS = re.compile(r"nGpus\s+(\d+)")
MAX_SIZE_BYTES = 2**40  # 1 TiB: far above any all-reduce nccl-tests can run


@dataclass(frozen=True)
class NcclRow:
    """One message size of one log: ``time_s`` = min(out-of-place, in-place) (module docstring)."""

    source: str
    gpus: int
    nodes: int
    size_bytes: int
    time_s: float
    out_of_place_s: float
    in_place_s: float

    @property
    def gpus_per_node(self) -> int:
        """``n / N``: the logs' nodes are equal."""
        return self.gpus // self.nodes


def _number(text: str, where: str, what: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise InputError(where, f"{what} is not a number: {short_repr(text)}") from None
    if not math.isfinite(x) or x <= 0:
        raise InputError(where, f"{what} must be a positive number, got {short_repr(text)}")
    return x


def _data_row(fields: list[str], where: str) -> tuple[int, float, float]:
    if len(fields) not in (12, 13):
        raise InputError(where, f"expected a data row of 12 fields (size count type redop, then time algbw busbw "
                                f"error out of place and in place; 13 with a root column), got {len(fields)}: "
                                f"{short_repr(' '.join(fields), 80)}")
    if not fields[0].isdigit():
        raise InputError(where, f"size (B) must be a whole number of bytes, got {short_repr(fields[0])}")
    size = int(fields[0])
    if not 0 < size <= MAX_SIZE_BYTES:
        raise InputError(where, f"size must be in [1, {MAX_SIZE_BYTES}] bytes, got {size}")
    out_us = _number(fields[-8], where, "out-of-place time (us)")
    in_us = _number(fields[-4], where, "in-place time (us)")
    return size, out_us * 1e-6, in_us * 1e-6


def parse_log(text: str, source: str) -> list[NcclRow]:
    """The rows of one log (module docstring); ``source`` names the file in errors."""
    hosts: dict[int, str] = {}
    n_gpus_header: int | None = None
    data: list[tuple[int, float, float]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _MPI_TAG.sub("", raw).strip()
        where = f"{source}:{number}"
        if not line:
            continue
        if line.startswith("#"):
            m = _RANK.match(line)
            if m:
                rank = int(m.group(1))
                if rank in hosts:
                    raise InputError(where, f"rank {rank} is listed twice")
                if len(hosts) >= MAX_WORKERS:
                    raise InputError(where, f"more than {MAX_WORKERS} ranks")
                hosts[rank] = m.group(2)
            elif n_gpus_header is None and (g := _GPUS.search(line)):
                n_gpus_header = int(g.group(1))
            continue
        data.append(_data_row(line.split(), where))
        if len(data) > MAX_MEASURED_ROWS:
            raise InputError(source, f"more than {MAX_MEASURED_ROWS} data rows")
    if not data:
        raise InputError(source, "no data rows (expected nccl-tests all_reduce_perf output)")
    if hosts:
        if sorted(hosts) != list(range(len(hosts))):
            raise InputError(source, f"ranks are not numbered 0..{len(hosts) - 1}")
        per_node: dict[str, int] = {}
        for h in hosts.values():
            per_node[h] = per_node.get(h, 0) + 1
        if len(set(per_node.values())) != 1:
            raise InputError(source, "nodes hold different numbers of ranks ("
                             + ", ".join(f"{h}: {c}" for h, c in sorted(per_node.items())) + "); lbsim needs equal nodes")
        gpus, nodes = len(hosts), len(per_node)
    elif n_gpus_header is not None and n_gpus_header >= 1:
        gpus, nodes = n_gpus_header, 1
    else:
        raise InputError(source, "no `# Rank ... on HOST device D` lines and no `nGpus` header: the GPUs are unknown")
    sizes = [d[0] for d in data]
    if len(set(sizes)) != len(sizes):
        raise InputError(source, "a message size appears twice (one all_reduce_perf run per file)")
    return [NcclRow(source, gpus, nodes, s, min(o, i), o, i) for s, o, i in data]


def read_logs(paths: Sequence[str | Path]) -> list[NcclRow]:
    """Every row of every log, in the order given; refused if two logs have the same GPU count."""
    rows: list[NcclRow] = []
    seen: dict[tuple[int, int], str] = {}
    for p in paths:
        path = Path(p)
        got = parse_log(read_measured_text(path, "log file"), path.name)
        key = (got[0].gpus, got[0].nodes)
        if key in seen:
            raise InputError(str(path), f"{key[0]} GPUs on {key[1]} node(s) again (also {seen[key]})")
        seen[key] = path.name
        rows.extend(got)
        if len(rows) > MAX_MEASURED_ROWS:
            raise InputError(str(path), f"more than {MAX_MEASURED_ROWS} data rows in all")
    if not rows:
        raise InputError("LOGS", "give at least one nccl-tests log")
    return rows
