"""Length distributions: a file of lengths (or a histogram), a capped lognormal, a constant.

A :class:`LengthDistribution` draws ``k`` lengths (whole tokens, >= 1) from a generator and knows
its mean and its longest possible length. An empirical distribution is the file's rows: each
distinct length ``L_j`` with probability ``count_j / sum count``, drawn by inverting the
cumulative counts (one uniform per sample). The lognormal is ``clip(round(m e^{sigma Z}), lo, hi)``;
its mean is computed on a fixed grid of 20,000 normal quantiles (deterministic, exact to ~1e-4
relative, used only to set the reference length).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np

from lbsim.errors import InputError
from lbsim.limits import MAX_TRACE_ROWS, short_repr
from lbsim.samples.config import MAX_TOKENS, ConstantLengths, FileLengths, LengthsConfig, LognormalLengths

MAX_LENGTH_FILE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class LengthDistribution:
    """Distinct lengths ``values`` (increasing) with cumulative counts ``cum`` (empirical), or a lognormal."""

    values: np.ndarray | None = None  # int64, increasing (empirical)
    cum: np.ndarray | None = None  # float64 cumulative probabilities, last = 1 (empirical)
    median_tokens: float = 0.0
    sigma: float = 0.0
    min_tokens: int = 1
    max_tokens: int = 1

    def draw(self, rng: np.random.Generator, k: int) -> np.ndarray:
        """``k`` lengths (int64)."""
        if self.values is not None:
            assert self.cum is not None
            idx = np.searchsorted(self.cum, rng.random(k), side="right")
            return self.values[np.minimum(idx, len(self.values) - 1)]
        z = rng.standard_normal(k)
        raw = np.rint(self.median_tokens * np.exp(self.sigma * z))
        return np.clip(raw, self.min_tokens, self.max_tokens).astype(np.int64)

    @property
    def longest(self) -> int:
        """The longest length a draw can give."""
        return int(self.values[-1]) if self.values is not None else self.max_tokens

    def mean(self) -> float:
        """The mean length: exact for an empirical distribution; for the capped, rounded lognormal the mean
        over 20,000 evenly spaced normal quantiles (deterministic)."""
        if self.values is not None:
            assert self.cum is not None
            p = np.diff(np.concatenate(([0.0], self.cum)))
            return float(np.dot(p, self.values))
        grid = 20_000
        nd = NormalDist()
        z = np.array([nd.inv_cdf((i + 0.5) / grid) for i in range(grid)])
        raw = np.clip(np.rint(self.median_tokens * np.exp(self.sigma * z)), self.min_tokens, self.max_tokens)
        return float(raw.mean())


def empirical(lengths: np.ndarray, counts: np.ndarray) -> LengthDistribution:
    """The distribution of ``lengths`` weighted by ``counts`` (both 1-D, same size, counts > 0)."""
    values, inverse = np.unique(lengths, return_inverse=True)
    totals = np.bincount(inverse, weights=counts.astype(np.float64))
    cum = np.cumsum(totals) / totals.sum()
    cum[-1] = 1.0
    return LengthDistribution(values=values.astype(np.int64), cum=cum)


def _whole(cell: str, key: str, line: int, low: int) -> int:
    try:
        value = float(cell)
    except ValueError:
        raise InputError(key, f"row at line {line}: {short_repr(cell)} is not a number") from None
    if not value.is_integer() or not low <= value <= MAX_TOKENS:
        raise InputError(key, f"row at line {line}: {short_repr(cell)} is not a whole number in {low}..{MAX_TOKENS}")
    return int(value)


def read_lengths_file(path: str | Path, key: str, cap: int | None = None) -> LengthDistribution:
    """Read a lengths CSV (``tokens`` column, optional ``count``); errors name ``key`` and the line.

    ``cap``: the memory cap in tokens; a longer row is an error naming its line."""
    p = Path(path)
    if not p.is_file():
        raise InputError(key, f"lengths file {short_repr(str(path))} not found")
    if p.stat().st_size > MAX_LENGTH_FILE_BYTES:
        raise InputError(key, f"lengths file is larger than the bound of {MAX_LENGTH_FILE_BYTES} bytes")
    lengths: list[int] = []
    counts: list[int] = []
    try:
        with open(p, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            header = [c.strip() for c in next(reader, [])]
            if "tokens" not in header:
                raise InputError(key, f"the header {short_repr(','.join(header))} has no `tokens` column "
                                      "(valid columns: tokens, count)")
            ti = header.index("tokens")
            ci = header.index("count") if "count" in header else None
            for row in reader:
                if not any(c.strip() for c in row):
                    continue
                line = reader.line_num
                if len(lengths) >= MAX_TRACE_ROWS:
                    raise InputError(key, f"more than {MAX_TRACE_ROWS} rows, the bound for a lengths file")
                if len(row) <= max(ti, ci or 0):
                    raise InputError(key, f"row at line {line}: {len(row)} fields, the header has {len(header)}")
                length = _whole(row[ti].strip(), key, line, 1)
                if cap is not None and length > cap:
                    raise InputError(key, f"row at line {line}: {length} tokens, above the memory cap "
                                          f"workload.sample_cost.max_tokens = {cap}")
                lengths.append(length)
                counts.append(1 if ci is None else _whole(row[ci].strip(), key, line, 1))
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - only I/O, decoding and csv run here
        raise InputError(key, f"cannot read the lengths file as UTF-8 CSV text: {type(exc).__name__}") from None
    if not lengths:
        raise InputError(key, "the lengths file has no rows (an empty histogram)")
    return empirical(np.array(lengths, dtype=np.int64), np.array(counts, dtype=np.int64))


def distribution(cfg: LengthsConfig, key: str, cap: int | None = None) -> LengthDistribution:
    """The distribution a ``lengths:`` section describes (``key``: its key path, for errors)."""
    if isinstance(cfg, FileLengths):
        return read_lengths_file(cfg.path, f"{key}.path", cap)
    if isinstance(cfg, LognormalLengths):
        return LengthDistribution(median_tokens=cfg.median_tokens, sigma=cfg.sigma, min_tokens=cfg.min_tokens,
                                  max_tokens=cfg.max_tokens)
    assert isinstance(cfg, ConstantLengths)
    return LengthDistribution(values=np.array([cfg.tokens], dtype=np.int64), cum=np.array([1.0]))
