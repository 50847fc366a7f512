"""A body whose transcript list msgspec decodes straight into a dialect's typed items, at first
sight of a long transcript (gateway/ingress/split.py `parse_transcript`).

Parsing a long transcript whole with orjson builds a dict per item, which the depth check then
walks and the dialect's decode checks field by field before it builds the canonical message: for
the plain shapes an agent sends turn after turn, msgspec checks the same in C while it parses
(`TypedItems.decoder`: its Structs accept exactly those shapes), and its objects are smaller and
nested no deeper than the Structs (`TypedItems.depth`), so the depth walk has nothing to do. Any
other body (an item of another shape, a value the Structs refuse, a key named twice) is
parsed whole by orjson as before, so every error a client sees is the one the whole parse gives.

The other top-level fields are parsed by orjson from the raw texts msgspec found for them, as
`parse_split` does. msgspec keeps a duplicate key's last value without checking the earlier one
as orjson would (UTF-8, numbers too large for a double): the body's members are walked in its
bytes (`slices.field_at`), each compared with the value kept for its key, and a body naming a key
twice is parsed whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import orjson

from gateway.ingress.field_depth import check_fields_depth
from gateway.ingress.slices import FIELDS, UNREADABLE, field_at, last_item_end


@dataclass(frozen=True, slots=True)
class TypedItems:
    """A dialect's typed reading of its transcript list: `decoder` reads the list's JSON text
    into Structs (raising for any item of another shape); `depth`: how deep in the body an item's
    values nest at most (the body 1, the list 2, an item 3), checked against `max_json_depth`;
    `kinds`: the Structs' types, which the dialect's decode takes as checked."""

    decoder: msgspec.json.Decoder[Any]
    depth: int
    kinds: frozenset[type]


def typed_body(raw: bytes, field: str, typed: TypedItems, max_depth: int) -> dict[str, Any] | None:
    """The body `raw` with its list in `field` read by `typed`, the other fields by orjson, and
    depth-checked as `parse_json_body(raw, max_depth, field)` does; None: parse it whole."""
    read = typed_read(raw, field, typed, max_depth)
    return None if read is None else read[0]


def typed_read(
    raw: bytes, field: str, typed: TypedItems, max_depth: int
) -> tuple[dict[str, Any], tuple[int, int]] | None:
    """`typed_body`, and where its list is in `raw` (`slices.list_span`, from the fields it read
    anyway: the next turn goes on from it without reading the body again)."""
    if max_depth < typed.depth:
        return None
    try:
        fields = FIELDS.decode(raw)
        listed = fields.get(field)
        # each key once, as the whole parse checks every value (slices.field_at walks the members)
        at = None if listed is None else field_at(raw, fields, field)
        if at is None:
            return None
    except UNREADABLE:
        return None
    body: dict[str, Any] = {}
    try:
        for name, value in fields.items():
            body[name] = None if name == field else orjson.loads(memoryview(value))
        body[field] = typed.decoder.decode(listed)
    except (orjson.JSONDecodeError, *UNREADABLE):
        return None
    check_fields_depth(body, fields, max_depth, field)
    # the list decoded as one, so its text opens with `[` as `list_span` checks
    return body, (at, at + last_item_end(listed))
