"""A large body parsed in bounded pieces, for the worker thread of large requests (gateway/offload.py).

The worker thread hands the GIL to the event loop between two bytecodes, never inside one C call:
the body's single `orjson.loads` (~50-90 ms for 5 MB) was the longest wait it caused. Here msgspec
reads a large object or array as the raw texts of its members (`msgspec.Raw`, building nothing but
the slices), a member that is itself large is read so in turn, and the small members are parsed by
orjson in groups of about `piece` bytes (`[` + members + `]`): no one call reads much more than a
piece of the body, bar the slice reads and one value larger than a piece that is not an object
or array (one long string).

The result is what `parse_json_body` gives, or that parse is made whole instead: every value
orjson parses is orjson's, a key msgspec decodes is the same string (both refuse what is not
UTF-8, bad escapes and lone surrogates), a duplicate key keeps its first place and its last value
in both. What msgspec skips without orjson seeing it (the earlier value of a duplicate key) is
checked for what msgspec lets through and orjson refuses: bytes that are not UTF-8 and numbers
too large for a double (`_suspect`); a body deeper than orjson parses is parsed whole (its error)."""

from __future__ import annotations

import codecs
import re
from bisect import bisect_left
from itertools import accumulate, count
from operator import add
from typing import Any

import msgspec
import orjson

from gateway.ingress.errors import depth_checked, parse_json_body

PIECE_BYTES = 256 << 10
# orjson refuses a document nested deeper than this
ORJSON_NESTING = 1024

_OBJECT = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])
_UNREAD = (msgspec.DecodeError, ValueError, RecursionError, orjson.JSONDecodeError)
_SPACE = re.compile(rb"[ \t\r\n]*")
# a number that may be too large for a double (orjson refuses it, msgspec's skip does not): an
# exponent of three digits or more, or a run of 100 digits; looked for in the body with every
# digit written 0, E as e, + dropped and every other byte a space (fast searches: a regular expression
# took ~10 ns a byte), so anything like it, in a string too, has the body parsed whole
_NUMBERS = bytes(ord("0") if 48 <= b <= 57 else ord("e") if b in b"eE" else ord(" ") for b in range(256))
_HUGE = (b"0e000", b"0" * 100)
_OVERLAP = 512
_OPENINGS = (b"{", b"[")


class _Whole(Exception):
    """Parse the body whole: the pieces cannot tell what that parse says."""


def parse_json_pieces(raw: bytes, max_depth: int, skip: str | None = None, piece: int = PIECE_BYTES) -> Any:
    """`parse_json_body(raw, max_depth, skip)`, read in pieces of about `piece` bytes."""
    if len(raw) > piece:
        try:
            value = _pieces(raw, piece)
        except (_Whole, *_UNREAD):
            value = None
        if value is not None:
            return depth_checked(value, raw, max_depth, skip)
    return parse_json_body(raw, max_depth, skip)


def _pieces(raw: bytes, piece: int) -> Any:
    if _suspect(raw, piece):
        return None
    start = _SPACE.match(raw).end()  # type: ignore[union-attr]
    first = raw[start : start + 1]
    if first not in _OPENINGS:
        return None  # a scalar document: one value, parsed whole
    return _container(raw, first, 1, piece)


def _suspect(raw: bytes, piece: int) -> bool:
    """`raw` is not UTF-8, or may hold a number orjson refuses (read a piece at a time)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for start in range(0, len(raw), piece):
            chunk = raw[start : start + piece + _OVERLAP]
            numbers = chunk.translate(_NUMBERS, b"+")
            if any(huge in numbers for huge in _HUGE):
                return True
            decoder.decode(chunk[:piece])
        decoder.decode(b"", True)
    except UnicodeDecodeError:
        return True
    return False


def _container(text: Any, first: bytes, depth: int, piece: int) -> Any:
    """The object or array `text` (opening with `first`), nested `depth` deep in the body."""
    if depth > ORJSON_NESTING:
        raise _Whole
    if first == b"{":
        members = _OBJECT.decode(text)
        keys = list(members)
        values = _values(list(members.values()), depth + 1, piece)
        return dict(zip(keys, values, strict=True))
    return _values(_ARRAY.decode(text), depth + 1, piece)


def _values(texts: list[Any], depth: int, piece: int) -> list[Any]:
    """The values of `texts` (each at `depth`): a large object or array read in pieces, the runs
    of others between them parsed by orjson in groups of about `piece` bytes."""
    out: list[Any] = []
    run = 0
    for index in [i for i, length in enumerate(map(len, texts)) if length > piece]:
        text = texts[index]
        first = bytes(memoryview(text)[:1])
        if first in _OPENINGS:
            out += _groups(texts[run:index], depth, piece)
            out.append(_container(text, first, depth, piece))
            run = index + 1
    out += _groups(texts[run:], depth, piece)
    return out


def _groups(texts: list[Any], depth: int, piece: int) -> list[Any]:
    """`texts` parsed by orjson, as many at a time as fill about `piece` bytes (with their commas,
    found by bisection on the running total: no Python step per value)."""
    out: list[Any] = []
    ends = list(map(add, accumulate(map(len, texts)), count(1)))
    start = done = 0
    while start < len(texts):
        stop = min(bisect_left(ends, done + piece, start) + 1, len(texts))
        out += _parse_group(texts[start:stop], depth)
        done, start = ends[stop - 1], stop
    return out


def _parse_group(texts: list[Any], depth: int) -> list[Any]:
    """The values `texts` (at `depth`), parsed inside as many brackets as hold them in the body:
    orjson refuses what is nested past its limit there as the whole parse would."""
    outer = depth - 1
    parsed = orjson.loads(b"[" * outer + b",".join(texts) + b"]" * outer)
    for _ in range(outer - 1):
        parsed = parsed[0]
    return parsed  # type: ignore[no-any-return]
