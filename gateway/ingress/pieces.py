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
from typing import Any

import msgspec
import orjson

from gateway.ingress.errors import ClientError, check_depth, parse_json_body

PIECE_BYTES = 256 << 10
# orjson refuses a document nested deeper than this
ORJSON_NESTING = 1024

_OBJECT = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])
_UNREAD = (msgspec.DecodeError, ValueError, RecursionError, orjson.JSONDecodeError, ClientError)
_SPACE = re.compile(rb"[ \t\r\n]*")
# a positive exponent of 100 or more, or a run of 100 digits: a number that may be too large for a
# double (orjson refuses it, msgspec's skip does not); anything like it, in a string too, has the
# body parsed whole
_HUGE = re.compile(rb"\d[eE]\+?0*[1-9]\d\d|\d{100}")
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
            if raw.count(b"{") + raw.count(b"[") > max_depth:
                check_depth(value, max_depth, skip)
            return value
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
            if _HUGE.search(chunk):
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
    """The values of `texts` (each at `depth`): a large object or array read in pieces, the others
    parsed by orjson in groups of about `piece` bytes."""
    out: list[Any] = [None] * len(texts)
    group: list[int] = []
    size = 0
    for index, text in enumerate(texts):
        length = len(text)
        if length > piece:
            first = bytes(memoryview(text)[:1])
            if first in _OPENINGS:
                out[index] = _container(text, first, depth, piece)
                continue
        group.append(index)
        size += length + 1
        if size >= piece:
            _parse_group(texts, group, out, depth)
            group, size = [], 0
    if group:
        _parse_group(texts, group, out, depth)
    return out


def _parse_group(texts: list[Any], group: list[int], out: list[Any], depth: int) -> None:
    joined = b"[" + b",".join(texts[i] for i in group) + b"]"
    parsed = orjson.loads(joined)
    # nested past what orjson parses whole (its values at `depth`, its list one above)? then the
    # whole parse's error: a body with fewer brackets cannot be
    if joined.count(b"{") + joined.count(b"[") + depth - 2 > ORJSON_NESTING:
        try:
            check_depth(parsed, ORJSON_NESTING, start=depth - 1)
        except ClientError:
            raise _Whole from None
    for i, value in zip(group, parsed, strict=True):
        out[i] = value
