"""The depth check of a body read in parts (gateway/ingress/split.py, typed_items.py): its
top-level fields other than the transcript, each parsed from its own JSON text. An agent re-sends
the same large fields every turn (~20 tool schemas), so a long field's nesting is remembered by
its text and not walked again; the verdict is `check_depth(body, limit, skip)`'s."""

from __future__ import annotations

from typing import Any

from gateway.bounded_cache import BoundedCache
from gateway.ingress.budget import KnownList
from gateway.ingress.errors import check_depth, invalid, nesting

# a field's text at least this long has its nesting remembered (a shorter one is walked: cheaper
# than hashing its text)
REMEMBERED_BYTES = 1024
# texts remembered (at most 256, then forgotten all at once: a few distinct tool lists per gateway)
_NESTING: BoundedCache[bytes, int] = BoundedCache(256)


def check_fields_depth(body: dict[str, Any], texts: dict[str, Any], limit: int, skip: str) -> None:
    """`check_depth(body, limit, skip)` for a body whose fields other than `skip` were parsed from
    `texts` (their JSON texts by name: `slices.FIELDS`)."""
    walked: dict[str, Any] = {}
    deepest = 0
    for name, value in body.items():
        kind = type(value)
        if kind is KnownList:  # its nesting found when its text was first read
            deepest = max(deepest, 1 + value.nesting)
            continue
        if name == skip or (kind is not dict and kind is not list):
            walked[name] = value
            continue
        text = texts[name]
        if len(text) < REMEMBERED_BYTES:
            walked[name] = value
            continue
        key = bytes(text)
        found = _NESTING.get(key)
        if found is None:
            found = _NESTING.keep(key, nesting(value))
        deepest = max(deepest, 1 + found)  # the body is at depth 1
    if deepest > limit:
        raise invalid(f"JSON nesting deeper than {limit} levels")
    check_depth(walked, limit, skip)
