"""Tool lists decoded before, found again by their JSON text.

An agent sends the same tool definitions on every turn (a coding agent: tens of tools with their
JSON schemas), and validating them into wire models and decoding them was most of a short turn's
decode (chat, the bench's 20 tools: ~29 us, against ~4 us to serialize them as the key). A list
seen before is taken from here. A list not seen before is decoded as without this, and only one
that decoded is kept: an invalid list is refused exactly as before, every time.

The value a list decodes to depends on nothing but the list (its JSON values, which its text
gives back exactly), so two requests with the same text get equal values; values are immutable
and shared, as the decode memo's are (gateway/ingress/memo.py).

A body read in parts (gateway/ingress/split.py, typed_items.py) has each top-level field's JSON
text as the client sent it: a dialect whose typed reading names its `ToolLists` has its `tools`
text looked up as it is (`read`), and a text seen before is neither parsed (~25 us for the
bench's 20 tools, the same again to walk and serialize them) nor decoded: the body holds a
`KnownList` of what it decoded to. Its text is the key: the same bytes are the same JSON values.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import orjson
from cachetools import LRUCache

from gateway.ingress.budget import KnownList, item_parts
from gateway.ingress.errors import nesting

T = TypeVar("T")

# what the kept lists may hold in all, each charged its text and the objects it decoded to (the
# bench's 20 tools, measured with tracemalloc: chat and Responses ~2x the text, Messages ~4.5x,
# Gemini ~5.5x: charged 6x)
BUDGET = 4 << 20
CHARGE = 6
# a longer list would take a large share of the budget from the lists of every other client
MAX_TEXT = 128 << 10


class ToolLists(Generic[T]):
    """`decode(tools)` of the lists seen before, by their text; a list that does not serialize
    (not JSON values) or is too long to keep is decoded every time.

    One LRU holds both texts a list is found by: the text orjson writes for a list parsed with its
    body (`decoded`) and the text a body read in parts sent (`read`). Both give back the same
    values, so they decode to the same value; a client that writes JSON as orjson does (no
    spaces: JavaScript's `JSON.stringify`) has its list kept once, found by both, and the
    budget bounds every list kept, by either text."""

    def __init__(self, decode: Callable[[Any], T], budget: int = BUDGET) -> None:
        self._decode = decode
        self._kept: LRUCache[bytes, KnownList] = LRUCache(
            maxsize=budget, getsizeof=lambda k: CHARGE * len(k.text) + 256
        )
        self._lock = threading.Lock()  # decodes also run in the worker thread (gateway/offload.py)

    def decoded(self, tools: Any) -> T:
        try:
            text = orjson.dumps(tools)
        except orjson.JSONEncodeError:
            return self._decode(tools)
        with self._lock:
            known = self._kept.get(text)
        if known is not None:
            return known.value  # type: ignore[no-any-return]
        value = self._decode(tools)  # raises as it would without the memo; nothing is kept then
        if len(text) <= MAX_TEXT:
            # counted only if a body read in parts sends this text (`read`): the walk that
            # finds a list's nesting costs most of what decoding it does
            with self._lock:
                self._kept[text] = KnownList(text, value, UNCOUNTED, UNCOUNTED)
        return value

    def read(self, text: Any) -> Any:
        """The body's value of its `tools` field from the field's JSON text (bytes or a view):
        a `KnownList` when the text decoded before or decodes now, else the text parsed as
        `orjson.loads` parses it (raising its error)."""
        key = bytes(text)
        with self._lock:
            known = self._kept.get(key)
        if known is not None and known.parts != UNCOUNTED:
            return known
        parsed = orjson.loads(key)
        if type(parsed) is not list or len(key) > MAX_TEXT:
            return parsed
        try:
            value = self.decoded(parsed)  # kept by `decoded` (uncounted): found there by this text
        except Exception:  # noqa: BLE001 - the request's decode meets it again and reports it in its place
            return parsed
        known = KnownList(key, value, sum(map(item_parts, parsed)), nesting(parsed))
        with self._lock:
            self._kept[key] = known
        return known

    def __len__(self) -> int:
        return len(self._kept)


UNCOUNTED = -1  # a kept list's parts and nesting before a body read in parts sent its text
