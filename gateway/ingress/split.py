"""A request body read at its transcript items without parsing them: an agent's turn re-sends a
history the decode memo already knows (gateway/ingress/memo.py), and parsing it is most of what
the turn would cost.

msgspec reads the body's top-level fields and its transcript list's items as the raw JSON texts
the client sent (in C, building nothing but the slices); the other fields are parsed by orjson,
as the whole body would have been, and so are the items the memo does not know. A body that is
not a JSON object with a list in its transcript field, or a part orjson refuses, is parsed whole
instead (`None` here), so every error a client sees is the one the whole parse gives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from gateway.ingress.errors import check_depth
from gateway.ingress.memo import DecodeMemo, Items
from gateway.ingress.slices import FIELDS, ITEMS, UNREADABLE

# the deepest body orjson parses whole: deeper limits make the parts' parse accept what the whole's
# refuses, so a body checked against one is parsed whole
ORJSON_DEPTH = 1024


def parse_split(
    raw: bytes,
    field: str,
    memo: DecodeMemo,
    scope: str,
    max_depth: int,
    check_parts: Callable[[Any], None],
    values: int | None = None,
) -> tuple[dict[str, Any], Items[Any]] | None:
    """The body, with `field` holding the items' values (`Known` for an item the memo found,
    left unparsed), and the items as the memo found them; checked in the order of the whole
    parse: the body's depth without the items, `check_parts`, each new item's depth. None: parse
    the body whole. `values`: at least the JSON values of the body, when counted already."""
    if max_depth > ORJSON_DEPTH or not memo.enabled:
        return None
    try:
        fields = FIELDS.decode(raw)
        listed = fields.get(field)
        if listed is None:
            return None
        slices = ITEMS.decode(listed)
    except UNREADABLE:  # the whole parse says what is wrong
        return None
    body: dict[str, Any] = {}
    try:
        for name, value in fields.items():
            body[name] = None if name == field else orjson.loads(memoryview(value))
    except orjson.JSONDecodeError:
        return None
    found = memo.split(scope, [bytes(memoryview(s)) for s in slices], raw, values)
    if found is None:
        return None
    values, items = found
    body[field] = values
    check_depth(body, max_depth, field)
    check_parts(body)
    items.check_depth(values, max_depth)
    return body, items
