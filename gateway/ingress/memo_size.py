"""What the decode memo's entries hold (gateway/ingress/memo.py), bounded from the JSON texts they
were decoded from: walking a thousand decoded messages took longer than decoding them."""

from __future__ import annotations

import re
import sys
from enum import Enum
from typing import Any

from gateway.ingress.budget import value_bound

# what an entry costs beyond its key's bytes and its decoded objects: the key and value tuples,
# the size and part count, the OrderedDict's slot and links (measured at ~280 bytes with tracemalloc)
_OVERHEAD = 320
# the most the canonical objects cost per JSON value (a container or a separator) of the item
# they were decoded from, and per item (a message, its tuple of blocks, a block): the bound's
# constants (tests/ingress/test_memo.py checks the bound holds on generated transcripts)
_PER_VALUE = 96
_PER_ITEM = 512
# RSS over the bytes the objects hold: what an entry leaves unusable around it in the
# allocator's pools once entries come and go (measured with bench/memo.py: RSS growth was 1.26x
# to 1.40x the tracemalloc-measured size for agent and for short chat transcripts)
RSS_FACTOR = 1.3
_ATOMIC = (str, bytes, int, float)
_SHARED = (bool, type(None), Enum)
# a \u escape, looked for in a whole body: `in` took ~0.8 ns a byte on an agent's body (a 2 KB
# tool result holds dozens of \n), the regular expression's search for its backslashes half that
_ESCAPE = re.compile(rb"\\u")


def deep_size(value: Any) -> int:
    """The bytes `value` and everything it refers to hold (each object once): strings, numbers,
    tuples, lists, dicts, and objects with __slots__ or a __dict__. Shared singletons (None, bools,
    enum members) cost nothing."""
    seen: set[int] = set()
    stack = [value]
    total = 0
    getsizeof = sys.getsizeof
    while stack:
        obj = stack.pop()
        if isinstance(obj, _SHARED) or id(obj) in seen:
            continue
        seen.add(id(obj))
        total += getsizeof(obj)
        if isinstance(obj, _ATOMIC):
            continue
        if isinstance(obj, tuple | list | set | frozenset):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        else:
            for cls in type(obj).__mro__:
                for name in getattr(cls, "__slots__", ()):
                    if hasattr(obj, name):
                        stack.append(getattr(obj, name))
            attrs = getattr(obj, "__dict__", None)
            if attrs is not None:
                stack.append(attrs)
    return total


def bound_size(raw: bytes) -> int:
    """At least what an item decoded from the JSON text `raw` holds, its canonical objects and
    strings (not the key): a string never holds more characters than its JSON literal has bytes,
    one byte each when the text is ASCII without \\u escapes (which can widen a whole string)."""
    narrow = raw.isascii() and raw.find(b"\\u") < 0
    chars = len(raw) if narrow else 4 * len(raw)
    values = value_bound(raw, 0, len(raw))
    return chars + _PER_VALUE * values + _PER_ITEM


def entry_size(raw: bytes) -> int:
    """What an entry kept under `raw` is counted."""
    return int((sys.getsizeof(raw) + bound_size(raw) + _OVERHEAD) * RSS_FACTOR)


def narrow(body: bytes) -> bool:
    """Whether every string `body` holds decodes one character a byte, one byte each: ASCII
    without \\u escapes."""
    return body.isascii() and _ESCAPE.search(body) is None


def narrow_around(body: bytes, start: int, end: int) -> bool:
    """`narrow(body)`, when `body[start:end]` is known narrow (the bytes a held narrow body shares
    with it): only what lies around them is read (a \\u escape is two bytes, so the byte each side
    of that run is read with what lies outside it)."""
    head, tail = body[: start + 1], body[max(end - 1, 0) :]
    return head.isascii() and tail.isascii() and _ESCAPE.search(head) is None and _ESCAPE.search(tail) is None


def body_turn_size(
    body: bytes, values: int, items: int, extra: int, *, narrow_text: bool | None = None
) -> int:
    """At least `turn_size` of `items` items taken from `body` plus `extra` bytes of opening,
    from the body's own bound of its JSON values (`values`: counted before it was parsed).
    `narrow_text`: `narrow(body)` when known (None: scanned here); False takes every string as
    wide, which is always a bound (a scan for \\u escapes costs a tenth of a request that never
    repeats)."""
    if narrow_text is None:
        narrow_text = narrow(body)
    chars = len(body) if narrow_text else 4 * len(body)
    per_item = sys.getsizeof(b"") + _PER_ITEM + _OVERHEAD
    return int((len(body) + extra + chars + _PER_VALUE * values + items * per_item) * RSS_FACTOR)


def turn_size(raws: list[bytes]) -> int:
    """At least the sum of `entry_size` over `raws`, in one pass over their joined bytes."""
    joined = b"".join(raws)
    per_item = sys.getsizeof(b"") + _PER_ITEM + _OVERHEAD
    return int((len(joined) + bound_size(joined) + len(raws) * per_item) * RSS_FACTOR)
