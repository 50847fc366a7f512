"""A JSON body's top-level fields, and the items of a list in one of them, as the raw texts the
client sent: msgspec reads them in C, building nothing but the slices (`msgspec.Raw`)."""

from __future__ import annotations

import re
from functools import cache

import msgspec

FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
# what reading a body in parts raises for one it cannot read: not an object with a list there, not
# JSON, a key not UTF-8 (ValueError), or nested past what msgspec reads
UNREADABLE = (msgspec.DecodeError, ValueError, RecursionError)


# the opening a request is recognised by before anything is parsed: its transcript field's key
# through the end of the second value closed in its list (a `}` followed by `,` or `]`: the end of
# an item, or of a block inside one), at most this many bytes of it (a long system prompt is
# recognised by its start)
_OPENING_BYTES = 16 << 10
_CLOSED = re.compile(rb"\}\s*[,\]]")


@cache
def _list_key(field: str) -> re.Pattern[bytes]:
    """`field` as a key holding a list (never a tool parameter's property of that name)."""
    return re.compile(rb'"%s"\s*:\s*\[' % re.escape(field.encode()))


def opening_hash(raw: bytes, field: str) -> int | None:
    """A hash of how the list in `field` of the body `raw` opens (its first two items, or its
    first bytes), by a scan of at most `_OPENING_BYTES`: the same for every turn of a conversation
    that re-sends its history. None: no such list in sight."""
    found = _list_key(field).search(raw)
    if found is None:
        return None
    start = found.start()
    end = min(len(raw), start + _OPENING_BYTES)
    closed = 0
    for match in _CLOSED.finditer(raw, start, end):
        closed += 1
        if closed == 2:
            end = match.start() + 1
            break
    return hash(raw[start:end])


def item_texts(raw: bytes, field: str) -> list[bytes] | None:
    """Each item of the list in `field` of the JSON object `raw`, a copy of its bytes (a slice
    would keep the whole body alive); None when `raw` is not such an object."""
    try:
        listed = FIELDS.decode(raw).get(field)
        if listed is None:
            return None
        return [bytes(memoryview(text)) for text in ITEMS.decode(listed)]
    except UNREADABLE:
        return None


def held_items(body: bytes, field: str, count: int, raws: list[bytes] | None) -> list[bytes] | None:
    """The `count` items of the list in `field` of the JSON object `body`, as `item_texts` reads
    them; taken from `raws` (another body's items, in order) when its first `count`, written out
    as a list, are that list exactly: each is a whole JSON value, so the list reads the same
    either way, and `body` is read once instead of twice. None: not such a body."""
    if raws is not None and len(raws) >= count:
        try:
            listed = FIELDS.decode(body).get(field)
        except UNREADABLE:
            listed = None
        # compared as bytes: memoryview's == compares element by element (ten times longer)
        if listed is not None and bytes(listed) == b"[" + b",".join(raws[:count]) + b"]":
            return raws[:count]
    texts = item_texts(body, field)
    return texts if texts is not None and len(texts) == count else None
