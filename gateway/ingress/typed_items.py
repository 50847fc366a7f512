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

Finding the fields means msgspec skipping the whole list (~0.4 ms a MB) before the list is read.
An agent opens every conversation with the same fields around its transcript (model, tools,
parameters), so the outside of a body read typed is remembered per scope (a dialect and a
tenant, as the decode memo's: `Outside`; a few a scope, `BUDGET` in all): a body with the same
bytes before its list and after it, and a list between (`[` to `]`), has that body's fields, and
its list is decoded alone as one JSON value (msgspec refuses anything after it, so a member
hidden behind the list is not read as part of it; such a body is parsed whole).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec
import orjson
from cachetools import LRUCache

from gateway.ingress.field_depth import check_fields_depth
from gateway.ingress.slices import FIELDS, UNREADABLE, field_at, last_item_end

_OPEN, _CLOSE = ord("["), ord("]")


@dataclass(frozen=True, slots=True)
class TypedItems:
    """A dialect's typed reading of its transcript list: `decoder` reads the list's JSON text
    into Structs (raising for any item of another shape; None: the dialect has none, its items
    are parsed by orjson); `depth`: how deep in the body an item's values nest at most (the body
    1, the list 2, an item 3), checked against `max_json_depth`; `kinds`: the Structs' types,
    which the dialect's decode takes as checked. `tools`: the
    dialect's tool lists (gateway/ingress/tool_lists.py `ToolLists`), when its decode takes a
    `KnownList` in the body's `tools` field: a body read in parts has that field's text looked up
    there (`read_field`)."""

    decoder: msgspec.json.Decoder[Any] | None
    depth: int
    kinds: frozenset[type]
    tools: Any = None


def read_field(name: str, text: Any, typed: TypedItems | None) -> Any:
    """A top-level field of a body read in parts, from its JSON text: parsed by orjson (raising its
    error), or a `KnownList` for the dialect's tools seen before (`TypedItems.tools`)."""
    if name == TOOLS and typed is not None and typed.tools is not None:
        return typed.tools.read(text)
    return orjson.loads(memoryview(text))


TOOLS = "tools"  # the field a dialect's tool definitions are in, in every dialect


def typed_body(raw: bytes, field: str, typed: TypedItems, max_depth: int) -> dict[str, Any] | None:
    """The body `raw` with its list in `field` read by `typed`, the other fields by orjson, and
    depth-checked as `parse_json_body(raw, max_depth, field)` does; None: parse it whole."""
    read = typed_read(raw, field, typed, max_depth)
    return None if read is None else read[0]


class Outside(NamedTuple):
    """A body read typed, without its list: its bytes before the list (`head`, through the key
    and spaces before the `[`) and after it (`tail`, from the character after the `]`), and its
    top-level fields' JSON texts in order (the list's field: None)."""

    head: bytes
    tail: bytes
    texts: tuple[tuple[str, bytes | None], ...]


# an outside at most this long is remembered (an agent's tools and parameters: ~7 KB for 20 tools)
OUTSIDE_BYTES = 64 << 10
# outsides remembered per scope (the agent apps of a tenant), the last read first
OUTSIDES_PER_SCOPE = 4
# what the remembered outsides may hold in all (each charged its bytes twice: its head and tail,
# and its fields' texts), the scope least recently read typed forgotten first
BUDGET = 4 << 20


def _charge(outsides: tuple[Outside, ...]) -> int:
    return sum(2 * (len(o.head) + len(o.tail)) + 512 for o in outsides)


# (scope, field) -> the outsides of the bodies read typed lately in that scope
_OUTSIDES: LRUCache[tuple[str, str], tuple[Outside, ...]] = LRUCache(maxsize=BUDGET, getsizeof=_charge)
# cachetools is not thread-safe: the event loop's thread and the worker thread both read bodies
_LOCK = threading.Lock()


def typed_read(
    raw: bytes, field: str, typed: TypedItems, max_depth: int, scope: str | None = None
) -> tuple[dict[str, Any], tuple[int, int]] | None:
    """`typed_body`, and where its list is in `raw` (`slices.list_span`, from the fields it read
    anyway: the next turn goes on from it without reading the body again). `scope`: where the
    outside of a body read so is remembered (gateway/ingress/memo.py's scopes: a dialect and a
    tenant), and a body with the same outside is read without reading its fields again."""
    decoder = typed.decoder
    if decoder is None or max_depth < typed.depth:
        return None
    outside = None
    if scope is not None:
        with _LOCK:
            outsides = _OUTSIDES.get((scope, field), ())
        outside = _outside_of(raw, outsides)
    decoded = None
    if outside is not None:
        # the same bytes around a list as a body read so: its fields are that body's, and the
        # list between them, decoded alone as one JSON value, is where msgspec would have found it
        # (field_at's walk of that body saw each key once, its list's value starting there)
        listed: Any = memoryview(raw)[len(outside.head) : len(raw) - len(outside.tail)]
        texts: dict[str, Any] = dict(outside.texts)
        try:
            decoded = decoder.decode(listed)
        except msgspec.ValidationError:
            # msgspec validates as it parses: the item refused is in the body's own list (the
            # value after the same head), which a full read would refuse as well
            return None
        except UNREADABLE:
            # not one list between (a member after it, a second value): only the body's ends
            # are this outside's. Its own list may still read typed, as it would in a scope
            # without this outside (what a scope read before must not decide)
            outside = None
    if outside is None:
        try:
            texts = FIELDS.decode(raw)
            listed = texts.get(field)
            # each key once, as the whole parse checks every value (slices.field_at walks the members)
            at = None if listed is None else field_at(raw, texts, field)
            if at is None:
                return None
        except UNREADABLE:
            return None
    body: dict[str, Any] = {}
    try:
        for name, value in texts.items():
            body[name] = None if name == field else read_field(name, value, typed)
        body[field] = decoder.decode(listed) if decoded is None else decoded
    except (orjson.JSONDecodeError, *UNREADABLE):
        return None
    check_fields_depth(body, texts, max_depth, field)
    if outside is not None:
        at = len(outside.head)
    elif scope is not None:
        _remember(raw, at, at + memoryview(listed).nbytes, texts, (scope, field))
    # the list decoded as one, so its text opens with `[` as `list_span` checks
    return body, (at, at + last_item_end(listed))


def _outside_of(raw: bytes, outsides: tuple[Outside, ...]) -> Outside | None:
    """The first of `outsides` that `raw` opens and ends with, a list (`[` to `]`) between."""
    size = len(raw)
    for outside in outsides:
        head, tail = outside.head, outside.tail
        end = size - len(tail)
        if (
            end - len(head) >= 2
            and raw[len(head)] == _OPEN
            and raw[end - 1] == _CLOSE
            and raw.startswith(head)
            and raw.endswith(tail)
        ):
            return outside
    return None


def _remember(raw: bytes, at: int, end: int, texts: dict[str, Any], key: tuple[str, str]) -> None:
    """The outside of `raw`, read typed with its list at `raw[at:end]`, first of its scope's."""
    if len(raw) - (end - at) > OUTSIDE_BYTES:
        return
    head, tail = raw[:at], raw[end:]
    fields = tuple(
        (name, None if name == key[1] else bytes(memoryview(text))) for name, text in texts.items()
    )
    with _LOCK:
        kept = _OUTSIDES.get(key, ())
        others = tuple(o for o in kept if o.head != head or o.tail != tail)
        _OUTSIDES[key] = (Outside(head, tail, fields), *others[: OUTSIDES_PER_SCOPE - 1])
