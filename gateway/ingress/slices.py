"""A JSON body's top-level fields, and the items of a list in one of them, as the raw texts the
client sent: msgspec reads them in C, building nothing but the slices (`msgspec.Raw`)."""

from __future__ import annotations

import msgspec

FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
# what reading a body in parts raises for one it cannot read: not an object with a list there, not
# JSON, a key not UTF-8 (ValueError), or nested past what msgspec reads
UNREADABLE = (msgspec.DecodeError, ValueError, RecursionError)


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
