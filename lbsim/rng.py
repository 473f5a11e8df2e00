"""Named, independent random streams: determinism by construction.

Every random component draws from its own ``numpy.random.Generator``, derived from the
scenario seed and a stable name (``stream(seed, "markov", 0, "worker", 3)``). Adding a component
or drawing more from one never changes another's numbers; nothing seeds a global RNG.

The stream of ``(seed, *names)`` is PCG64 seeded by ``SeedSequence(entropy)``, with ``entropy``
the seed followed by each name's key (an int as itself, a string as the CRC-32 of its UTF-8).
``SeedSequence`` reads a list of ints as the concatenation of each int's 32-bit words (one word
for an int below 2**32); when every part is such an int, the entropy is handed over as that
``uint32`` array directly: the same words, so the same stream, without the per-int conversion.
"""

from __future__ import annotations

import zlib
from functools import lru_cache

import numpy as np

_WORD = 1 << 32


@lru_cache(maxsize=256)
def _name_key(part: str) -> int:
    return zlib.crc32(part.encode("utf-8"))


def _key(part: str | int) -> int:
    return part if isinstance(part, int) else _name_key(part)


def stream(seed: int, *names: str | int) -> np.random.Generator:
    """The generator for component ``names`` of a run seeded with ``seed``."""
    entropy = [seed, *(_key(n) for n in names)]
    if all(0 <= e < _WORD for e in entropy):  # one 32-bit word each: the words SeedSequence would make
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(np.array(entropy, dtype=np.uint32))))
    return np.random.default_rng(np.random.SeedSequence(entropy))
