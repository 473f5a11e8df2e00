"""Named, independent random streams: determinism by construction.

Every random component draws from its own ``numpy.random.Generator``, derived from the
scenario seed and a stable name (``stream(seed, "markov", 0, "worker", 3)``). Adding a component
or drawing more from one never changes another's numbers; nothing seeds a global RNG.

The stream of ``(seed, *names)`` is PCG64 seeded by ``SeedSequence(entropy)``, with ``entropy``
the seed followed by each name's key (an int as itself, a string as the CRC-32 of its UTF-8).
``SeedSequence`` reads a list of ints as the concatenation of each int's 32-bit words (one word
for an int below 2**32); when every part is such an int, the entropy is handed over as that
``uint32`` array directly: the same words, so the same stream, without the per-int conversion.

:func:`streams` makes many such generators at once (a fleet's jitter or Markov streams): the
``SeedSequence`` hash (numpy's ``mix_entropy`` and ``generate_state``: multiply, xor and shift
in 32-bit words) is computed for all of them with numpy, and each ``PCG64`` is seeded with its
four words: the same words ``SeedSequence`` gives, so the same streams as :func:`stream`.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.random.bit_generator import ISeedSequence

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


# numpy's SeedSequence constants (numpy/random/bit_generator.pyx): a pool of 4 words
_POOL = 4
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_MASK = _WORD - 1


class _Words:
    """A seed sequence that hands over state words already computed (:func:`streams`)."""

    __slots__ = ("words",)

    def __init__(self, words: np.ndarray) -> None:
        self.words = words

    def generate_state(self, n_words: int, dtype: type = np.uint32) -> np.ndarray:
        if n_words != 4 or np.dtype(dtype) != np.uint64:  # what PCG64 asks for: state and increment, 2 words each
            raise ValueError("precomputed words serve PCG64 only")
        return self.words


ISeedSequence.register(_Words)


def _hashmix(value: np.ndarray, const: int) -> tuple[np.ndarray, int]:
    value = value ^ np.uint32(const)
    const = (const * _MULT_A) & _MASK
    value = value * np.uint32(const)
    return value ^ (value >> np.uint32(16)), const


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r = (np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y).astype(np.uint32, copy=False)
    return r ^ (r >> np.uint32(16))


def _state_words(entropy: np.ndarray) -> np.ndarray:
    """``SeedSequence(row).generate_state(4, np.uint64)`` for each row of ``entropy`` (uint32, m x k)."""
    m, k = entropy.shape
    const = _INIT_A
    mixer = []
    for i in range(_POOL):
        v, const = _hashmix(entropy[:, i] if i < k else np.zeros(m, np.uint32), const)
        mixer.append(v)
    for i_src in range(_POOL):
        for i_dst in range(_POOL):
            if i_src != i_dst:
                h, const = _hashmix(mixer[i_src], const)
                mixer[i_dst] = _mix(mixer[i_dst], h)
    for i_src in range(_POOL, k):
        for i_dst in range(_POOL):
            h, const = _hashmix(entropy[:, i_src], const)
            mixer[i_dst] = _mix(mixer[i_dst], h)
    const = _INIT_B
    out = np.empty((m, 8), dtype="<u4")
    for i in range(8):
        v = mixer[i % _POOL] ^ np.uint32(const)
        const = (const * _MULT_B) & _MASK
        v = v * np.uint32(const)
        out[:, i] = v ^ (v >> np.uint32(16))
    return out.view("<u8").astype(np.uint64)


def streams(seed: int, names: Sequence[tuple[str | int, ...]]) -> list[np.random.Generator]:
    """``[stream(seed, *n) for n in names]``, the same generators, made at once."""
    keyed = [[seed, *(_key(p) for p in n)] for n in names]
    if not keyed or len({len(e) for e in keyed}) != 1 or not all(0 <= x < _WORD for e in keyed for x in e):
        return [stream(seed, *n) for n in names]
    with np.errstate(over="ignore"):
        words = _state_words(np.array(keyed, dtype=np.uint32))
    pcg, gen = np.random.PCG64, np.random.Generator
    return [gen(pcg(_Words(w))) for w in words]  # type: ignore[arg-type]  # an ISeedSequence (registered)
