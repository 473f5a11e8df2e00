"""Named, independent random streams: determinism by construction.

Every random component draws from its own ``numpy.random.Generator``, derived from the
scenario seed and a stable name (``stream(seed, "markov", 0, "worker", 3)``). Adding a component
or drawing more from one never changes another's numbers; nothing seeds a global RNG.
"""

from __future__ import annotations

import zlib

import numpy as np


def _key(part: str | int) -> int:
    return part if isinstance(part, int) else zlib.crc32(part.encode("utf-8"))


def stream(seed: int, *names: str | int) -> np.random.Generator:
    """The generator for component ``names`` of a run seeded with ``seed``."""
    return np.random.default_rng(np.random.SeedSequence([seed, *(_key(n) for n in names)]))
