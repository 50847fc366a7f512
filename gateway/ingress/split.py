"""A request body read at its transcript items without parsing them: an agent's turn re-sends a
history the decode memo already knows (gateway/ingress/memo.py), and parsing it is most of what
the turn would cost.

msgspec reads the body's top-level fields and its transcript list's items as the raw JSON texts
the client sent (in C, building nothing but the slices); the other fields are parsed by orjson,
as the whole body would have been, and so are the items the memo does not know. A body that is
not a JSON object with a list in its transcript field, or a part orjson refuses, is parsed whole
instead (`None` here), so every error a client sees is the one the whole parse gives.

`parse_transcript` is the exchange's parse of a body with a transcript (the memo's admission,
then in parts or whole), `parse_shared` the same holding the memo's lock (the event loop's
thread and the worker thread of large bodies share the memo).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from gateway.config import ServerConfig
from gateway.ingress.admission import check_parts
from gateway.ingress.budget import Shared, parsed_in_pieces
from gateway.ingress.errors import parse_json_body
from gateway.ingress.field_depth import check_fields_depth
from gateway.ingress.memo import DecodeMemo, Items
from gateway.ingress.pieces import parse_json_pieces
from gateway.ingress.slices import FIELDS, ITEMS, UNREADABLE, field_at
from gateway.ingress.typed_items import TypedItems, read_field, typed_read

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
    opening: tuple[str, int] | None = None,
    shared: Shared | None = None,
    typed: TypedItems | None = None,
) -> tuple[dict[str, Any], Items[Any]] | None:
    """The body, with `field` holding the items' values (`Known` for an item the memo found,
    left unparsed), and the items as the memo found them; checked in the order of the whole
    parse: the body's depth without the items, `check_parts`, each new item's depth. None: parse
    the body whole. `values`: at least the JSON values of the body, when counted already.
    `opening`: what `admit` knows the body's opening by (a long list read item by item is held
    under it for the next turn: gateway/ingress/memo_chain.py). `shared`: what counting the
    values found the body shares with the memo's held one (`DecodeMemo.held_bound`). `typed`: the
    dialect's typed reading, whose tool lists the body's `tools` text is looked up in
    (`typed_items.read_field`)."""
    if max_depth > ORJSON_DEPTH or not memo.enabled:
        return None
    # a turn going on from a held one: compared whole, only what follows the held list read
    chained = memo.chain(raw, field, values, shared)
    found: tuple[list[Any], Items[Any]] | None = None
    if chained is not None:
        fields, found = chained[0], (chained[1], chained[2])
    else:
        try:
            fields = FIELDS.decode(raw)
            listed = fields.get(field)
            # msgspec keeps a repeated key's last value unchecked, where orjson may refuse the
            # earlier one (not UTF-8, a number past a double): such a body is parsed whole
            if listed is None or field_at(raw, fields, field) is None:
                return None
            slices = ITEMS.decode(listed)
        except UNREADABLE:  # the whole parse says what is wrong
            return None
    body: dict[str, Any] = {}
    try:
        for name, value in fields.items():
            body[name] = None if name == field else read_field(name, value, typed)
    except orjson.JSONDecodeError:
        return None
    if chained is None:
        found = memo.split(scope, [bytes(memoryview(s)) for s in slices], raw, values)
    if found is None:
        return None
    items_values, items = found
    body[field] = items_values
    check_fields_depth(body, fields, max_depth, field)
    check_parts(body)
    items.check_depth(items_values, max_depth)
    if chained is None:
        memo.hold(opening, raw, field, items, values, fields)
    return body, items


def parse_shared(
    raw: bytes,
    field: str,
    memo: DecodeMemo,
    scope: str,
    limits: ServerConfig,
    values: int | None,
    wait: bool,
    typed: TypedItems | None = None,
    shared: Shared | None = None,
) -> tuple[Any, Items[Any] | None] | None:
    """`parse_transcript` holding the memo's lock: the event loop's thread and the worker thread
    of large bodies (gateway/offload.py) share the memo. `wait` False (the event loop): None when
    the other thread holds it, never waiting. What a request decodes later goes into its own
    `Items` and the turn it opened (list appends, atomic), so decoding needs no lock."""
    if len(raw) < memo.min_bytes:  # parsed whole, as without the memo: no lock to take
        return parse_transcript(raw, field, memo, scope, limits, values)
    if not memo.lock.acquire(blocking=wait):
        return None
    try:
        # the worker thread parses a long body whole in pieces: the event loop runs between them
        pieces = wait and parsed_in_pieces(values, len(raw))
        return parse_transcript(raw, field, memo, scope, limits, values, pieces, typed, shared)
    finally:
        memo.lock.release()


def parse_transcript(
    raw: bytes,
    field: str,
    memo: DecodeMemo,
    scope: str,
    limits: ServerConfig,
    values: int | None = None,
    pieces: bool = False,
    typed: TypedItems | None = None,
    shared: Shared | None = None,
) -> tuple[Any, Items[Any] | None]:
    """The body parsed once, and the transcript items (in `field`) the memo found under `scope`
    (gateway/ingress/memo.py): an item the memo knows is found by its bytes and neither parsed
    nor walked by the depth check (gateway/ingress/split.py); a body that cannot be read in parts
    is parsed whole, and its items found by their values; a body whose opening the memo has not
    seen, or shorter than the memo's `min_bytes`, is parsed whole and decoded as without the memo
    (a long one then waits on probation whole for the next request that opens so). `values`: at
    least the JSON values the body holds (`values_within_budget`). `pieces`: a body parsed whole
    is parsed in pieces (gateway/ingress/pieces.py: the worker thread's; the same result and
    errors). `typed`: the dialect's typed reading of the items, for a body parsed at first sight
    (gateway/ingress/typed_items.py; the same result and errors). `shared`: what the body shares
    with the memo's held one, when its values were counted from it (`DecodeMemo.held_bound`)."""
    limit = limits.max_json_depth
    if len(raw) < memo.min_bytes:
        body = parse_json_body(raw, limit)
        check_parts(body, limits, values)
        return body, None
    seen, opening = memo.admit(scope, raw, field)  # evidence of reuse: else parsed whole
    if seen:
        checks = partial(check_parts, limits=limits, values=values)
        split = parse_split(raw, field, memo, scope, limit, checks, values, opening, shared, typed)
        if split is not None:
            return split
    # at first sight the items are decoded as they are parsed; a seen body's are looked up by
    # their JSON text (`DecodeMemo.items`), so it is parsed by orjson
    read = None if seen or pieces or typed is None else typed_read(raw, field, typed, limit, scope)
    if read is not None:
        body, span = read
        check_parts(body, limits, values)
        items = memo.first_sight(body[field], limit, raw, field, opening, values, span=span)
        items.parsed_from(raw)
        return body, items
    body = parse_json_pieces(raw, limit, field) if pieces else parse_json_body(raw, limit, field)
    check_parts(body, limits, values)
    items = None
    if type(body) is dict:
        listed = body.get(field)
        if type(listed) is list:
            if seen:
                items = memo.items(scope, listed, limit)
            else:
                items = memo.first_sight(listed, limit, raw, field, opening, values)
    return body, items
