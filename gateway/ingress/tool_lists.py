"""Tool lists decoded before, found again by their JSON text.

An agent sends the same tool definitions on every turn (a coding agent: tens of tools with their
JSON schemas), and validating them into wire models and decoding them was most of a short turn's
decode (chat, the bench's 20 tools: ~29 us, against ~4 us to serialize them as the key). A list
seen before is taken from here. A list not seen before is decoded as without this, and only one
that decoded is kept: an invalid list is refused exactly as before, every time.

The value a list decodes to depends on nothing but the list (its JSON values, which its text
gives back exactly), so two requests with the same text get equal values; values are immutable
and shared, as the decode memo's are (gateway/ingress/memo.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import orjson
from cachetools import LRUCache

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
    (not JSON values) or is too long to keep is decoded every time."""

    def __init__(self, decode: Callable[[Any], T], budget: int = BUDGET) -> None:
        self._decode = decode
        # text -> (what it is charged, the value)
        self._kept: LRUCache[bytes, tuple[int, T]] = LRUCache(maxsize=budget, getsizeof=lambda e: e[0])
        self._lock = threading.Lock()  # decodes also run in the worker thread (gateway/offload.py)

    def decoded(self, tools: Any) -> T:
        try:
            text = orjson.dumps(tools)
        except orjson.JSONEncodeError:
            return self._decode(tools)
        with self._lock:
            entry = self._kept.get(text)
        if entry is not None:
            return entry[1]
        value = self._decode(tools)  # raises as it would without the memo; nothing is kept then
        if len(text) <= MAX_TEXT:
            with self._lock:
                self._kept[text] = (CHARGE * len(text) + 256, value)
        return value

    def __len__(self) -> int:
        return len(self._kept)
