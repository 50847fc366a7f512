"""A JSON body's top-level fields, and the items of a list in one of them, as the raw texts the
client sent: msgspec reads them in C, building nothing but the slices (`msgspec.Raw`)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import msgspec
import orjson

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


def item_texts(raw: bytes, field: str | None) -> list[bytes] | None:
    """Each item of the list in `field` of the JSON object `raw` (`field` None: `raw` is the list),
    a copy of its bytes (a slice would keep the whole body alive); None when `raw` is not such an
    object."""
    try:
        listed = raw if field is None else FIELDS.decode(raw).get(field)
        if listed is None:
            return None
        return [bytes(memoryview(text)) for text in ITEMS.decode(listed)]
    except UNREADABLE:
        return None


def held_items(body: bytes, field: str | None, count: int, raws: list[bytes] | None) -> list[bytes] | None:
    """The `count` items of the list in `field` of the JSON object `body`, as `item_texts` reads
    them; taken from `raws` (another body's items, in order) when its first `count`, written out
    as a list, are that list exactly: each is a whole JSON value, so the list reads the same
    either way, and `body` is read once instead of twice. None: not such a body."""
    if raws is not None and len(raws) >= count:
        try:
            listed = body if field is None else FIELDS.decode(body).get(field)
        except UNREADABLE:
            listed = None
        # compared as bytes: memoryview's == compares element by element (ten times longer)
        if listed is not None and bytes(listed) == b"[" + b",".join(raws[:count]) + b"]":
            return raws[:count]
    texts = item_texts(body, field)
    return texts if texts is not None and len(texts) == count else None


_SPACE = b" \t\r\n"


def last_item_end(listed: Any) -> int:
    """Where the last item of the JSON list text `listed` ends (the spaces before its `]` left
    out; 1 for an empty list)."""
    end = len(listed) - 1
    view = memoryview(listed)
    while end > 1 and view[end - 1] in _SPACE:
        end -= 1
    return end


def continued(text: bytes, held: Any, end: int) -> bytes | None:
    """The items of the JSON list `text` after the first ones, as a JSON list, when those are the
    items of the JSON list `held` (a list text whose last item ends at `end`: `last_item_end`):
    the same bytes up to there, then a `,` or the list's end after spaces. The list reads the
    same either way: a parser reads the same first items from the same bytes, the last of them
    ended there in `held` (by its `]`) as it does in `text` (by a `,` or `]`), and `text`'s
    remaining items follow that `,`. None: `text` does not go on from `held`."""
    if end <= 1 or not text.startswith(memoryview(held)[:end]):
        return None
    at = end
    while at < len(text) and text[at] in _SPACE:
        at += 1
    if at >= len(text):
        return None
    if text[at] == 0x2C:  # ,
        return b"[" + text[at + 1 :]
    return b"[]" if text[at] == 0x5D and at == len(text) - 1 else None


def went_on(held: Any, field: str | None, end: int, listed: Any) -> tuple[bytes, list[Any]] | None:
    """The list text `listed` (a copy) and its items after those of the list held (in `field` of
    the JSON object `held`, or `held` itself when `field` is None, its last item ending at `end`)
    parsed, when `listed` goes on from that list (`continued`). None: it does not, or those items
    are not JSON orjson reads."""
    try:
        if field is not None:
            held = FIELDS.decode(held)[field]
            end = last_item_end(held)
        text = bytes(memoryview(listed))
        tail = continued(text, held, end)
        if tail is None:
            return None
        return text, [orjson.loads(memoryview(item)) for item in ITEMS.decode(tail)]
    except (*UNREADABLE, KeyError, orjson.JSONDecodeError):
        return None
