"""A body's value bound (gateway/ingress/budget.py `value_bound`) is its `{`, `[` and `,` bytes,
however it is counted: a long chunk a piece at a time, by `replace`'s memchr counts where those
bytes are sparse and one `translate` pass where they are dense, a short one by `translate`."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.ingress import budget
from gateway.ingress.budget import value_bound


def _counted(chunk: bytes) -> int:
    return chunk.count(b"{") + chunk.count(b"[") + chunk.count(b",")


def _chunk(size: int, gap: int, seed: int) -> bytes:
    """`size` bytes of JSON-ish text holding a counted byte about every `gap` bytes (0: none)."""
    rng = random.Random(seed)
    out = bytearray(rng.choices(b'ab "\\:}]\n', k=size))
    if gap:
        for at in range(rng.randrange(gap), size, gap):
            out[at] = rng.choice(b"{[,")
    return bytes(out)


# sizes either side of a piece and of whole pieces; gaps either side of the density where the
# memchr counts give way to `translate` (`_SPARSE_GAP`), and the extremes
_PIECE = budget._PIECE
_SIZES = st.sampled_from([0, 1, 1000, _PIECE, _PIECE + 1, 2 * _PIECE, 2 * _PIECE + 7, 300_000])
_GAPS = st.sampled_from(
    [0, 1, 2, 7, budget._SPARSE_GAP - 1, budget._SPARSE_GAP, budget._SPARSE_GAP + 1, 76, 5000]
)


@settings(max_examples=150)
@given(_SIZES, _GAPS, st.integers(0, 2**32), st.integers(0, 3))
def test_the_bound_counts_the_counted_bytes_whatever_their_density(size, gap, seed, cut):
    raw = _chunk(size, gap, seed)
    start, end = [(0, size), (size // 3, size), (0, size - size // 4), (7, size + 10)][cut]
    assert value_bound(raw, start, end) == _counted(raw[start:end])


def test_counts_exactly_at_the_density_that_changes_the_way():
    most = _PIECE // budget._SPARSE_GAP
    for extra in (-1, 0, 1, 2):
        # a piece of `most + extra` counted bytes, spread over the three kinds in turn, and a
        # sparse one after it
        raw = bytearray(b"a" * (2 * _PIECE))
        for n in range(most + extra):
            raw[n * (_PIECE // (most + 2))] = b",{["[n % 3]
        raw[-1] = ord(",")
        assert value_bound(bytes(raw), 0, len(raw)) == most + extra + 1
        assert value_bound(bytes(raw), 1, len(raw) - 1) == most + extra - 1
