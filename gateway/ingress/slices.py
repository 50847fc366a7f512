"""A JSON body's top-level fields, and the items of a list in one of them, as the raw texts the
client sent: msgspec reads them in C, building nothing but the slices (`msgspec.Raw`)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import msgspec
import orjson

from gateway.ingress.budget import Shared, common_prefix

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
_SPACES = re.compile(rb"[ \t\r\n]*")
_KEY = re.compile(rb'"(?:[^"\\]|\\.)*"[ \t\r\n]*:[ \t\r\n]*')


def last_item_end(listed: Any) -> int:
    """Where the last item of the JSON list text `listed` ends (the spaces before its `]` left
    out; 1 for an empty list)."""
    end = len(listed) - 1
    view = memoryview(listed)
    while end > 1 and view[end - 1] in _SPACE:
        end -= 1
    return end


def field_at(raw: bytes, fields: dict[str, Any], field: str) -> int | None:
    """Where the value of `field` begins in the JSON object `raw`, whose top-level fields `FIELDS`
    read as `fields`: a walk over its keys, each followed by the exact bytes of the value read for
    it. None: `raw` is not written so (a key given twice: `fields` holds the last one's value and
    the key once), or `field` is not in it."""
    at = None
    pos = _SPACES.match(raw).end()
    if raw[pos : pos + 1] != b"{":
        return None
    pos = _SPACES.match(raw, pos + 1).end()
    for name, value in fields.items():
        key = _KEY.match(raw, pos)
        if key is None:
            return None
        text = key.group().rstrip(b" \t\r\n:")
        if (text[1:-1].decode() if text.find(b"\\") < 0 else orjson.loads(text)) != name:
            return None
        pos = key.end()
        if name == field:
            at = pos
        data = memoryview(value)
        if not raw.startswith(data, pos):
            return None
        pos = _SPACES.match(raw, pos + data.nbytes).end()
        if raw[pos : pos + 1] == b",":
            pos = _SPACES.match(raw, pos + 1).end()
    return at if raw[pos : pos + 1] == b"}" else None


def list_span(body: bytes, field: str, fields: dict[str, Any] | None = None) -> tuple[int, int] | None:
    """Where the list in `field` of the JSON object `body` begins, and where its last item ends
    (`last_item_end`), as offsets in `body` (`fields`: `body` read by `FIELDS`, when it was).
    None: not such a body, or not written so that `field_at` finds it."""
    try:
        if fields is None:
            fields = FIELDS.decode(body)
        listed = fields.get(field)
        if listed is None or memoryview(listed)[:1] != b"[":
            return None
        at = field_at(body, fields, field)
    except UNREADABLE:
        return None
    return None if at is None else (at, at + last_item_end(listed))


def held_list_at(raw: bytes, held: bytes, field: str, at: int, end: int) -> int | None:
    """Where `raw` holds the held body's list run `held[at:end]` (its `[` and items, as `list_span`
    finds them): at the same place, or where a field before it changed length (Codex switching
    model mid-session) after `raw`'s first `field` key holding a list (as `opening_hash` finds
    it). None: neither."""
    if raw.startswith(memoryview(held)[at:end], at):
        return at
    return _list_moved_to(raw, held, field, at, end)


def _list_moved_to(raw: bytes, held: bytes, field: str, at: int, end: int) -> int | None:
    """Where `raw`'s first `field` key holding a list has the held run `held[at:end]`, when that
    is not `at`."""
    found = _list_key(field).search(raw)
    if found is None:
        return None
    start = found.end() - 1
    return start if start != at and raw.startswith(memoryview(held)[at:end], start) else None


def shared_with(raw: bytes, held: bytes, values: int, span: tuple[int, int] | None, field: str) -> Shared:
    """What `raw` shares with the held body `held` (its `value_bound` `values`, its list in `field`
    at `span` when known): compared once, for its count (`budget.value_bound_after`) and its read
    (`went_on`)."""
    prefix = common_prefix(raw, held)
    at = None
    if span is not None:
        at = span[0] if prefix >= span[1] else held_list_at(raw, held, field, *span)
    return Shared(held, values, prefix, span, at)


def went_on(
    raw: bytes, held: bytes, field: str, at: int, end: int, shared: Shared | None = None
) -> tuple[dict[str, Any], list[Any], int, int] | None:
    """When the body `raw` goes on from the held body `held` (whose list in `field` begins at `at`
    and whose last item ends at `end`: `list_span`): the same bytes as `held[at:end]` from `start`
    (`at`, or where the list moved to: `held_list_at`) on, then a `,` or the list's end after
    spaces. Then `raw` reads as `doc`, the same body with that run of held items written as one
    `0`: both are a `[` and whole JSON values separated by commas, followed by a `,` or `]`, so
    one is valid JSON exactly when the other is, with the same fields; `doc` holds no more than
    what is new, and is all that is read. Returns `raw`'s fields (`FIELDS`: the list in `field`
    as `doc` has it), its items after the held ones (parsed), where its list begins (`start`)
    and where its last item ends. None: `raw` does not go on so, or is not JSON orjson and
    msgspec read alike. `shared`: what counting `raw`'s values found it shares with `held`
    (`shared_with`), when it did: not compared again."""
    same = False  # the held run at `at` known to be the list: the bytes up to its end the same
    if shared is not None and shared.held is held and (shared.prefix >= end or shared.span == (at, end)):
        same = shared.prefix >= end
        start = at if same else shared.at
    else:
        start = held_list_at(raw, held, field, at, end)
    if start is None:
        return None
    found = _read_on(raw, field, start, end - at)
    if found is None and start == at and not same:
        # the run only looked the same at its old place (inside a new item, after a field before
        # the list changed): where the list's key is
        moved = _list_moved_to(raw, held, field, at, end)
        if moved is not None:
            found = _read_on(raw, field, moved, end - at)
    return found


def _read_on(
    raw: bytes, field: str, start: int, run: int
) -> tuple[dict[str, Any], list[Any], int, int] | None:
    """`went_on`'s read of `raw` with the held run of `run` bytes at `start`."""
    if len(raw) <= start + run:
        return None
    after = _SPACES.match(raw, start + run).end()
    if raw[after : after + 1] not in (b",", b"]"):
        return None
    doc = raw[:start] + b"[0" + raw[start + run :]
    try:
        # msgspec leaves a field's bytes unchecked (a key not UTF-8 in an object after the list),
        # which the whole parse refuses: what is new is checked here (the held bytes were parsed;
        # UnicodeDecodeError is a ValueError)
        doc.decode()
        fields = FIELDS.decode(doc)
        if field_at(doc, fields, field) != start:
            return None
        listed = fields[field]
        new = [orjson.loads(memoryview(item)) for item in ITEMS.decode(listed)[1:]]
    except (*UNREADABLE, KeyError, orjson.JSONDecodeError):
        return None
    length = memoryview(listed).nbytes - 2 + run  # the list as `raw` has it
    return fields, new, start, start + last_item_end(memoryview(raw)[start : start + length])
