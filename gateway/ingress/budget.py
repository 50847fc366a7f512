"""What a request body may cost the gateway before it is decoded: the cheap bounds checked first,
so that a body of a million tiny JSON values is refused before it is parsed (parsing alone holds
the event loop for a second) and a transcript over the block limit before it is decoded.

- `JsonValues`: counts the JSON values of a raw body (at least one per container opened or
  comma, outside strings; what parsing costs is about linear in it), in steps, so the caller can
  let other requests run between steps. A body with fewer of those bytes than the cap in all
  (`value_bound`: C-speed counts, themselves a few ms per MiB) needs no such step.
- `raw_parts`: an upper bound of the content blocks a parsed body decodes to, from list lengths
  alone (every dialect keeps its transcript in top-level lists of items, whose parts are in a
  `content` or `parts` list).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import islice
from typing import Any, NamedTuple

from gateway.offload import OFFLOAD_BYTES, OFFLOAD_VALUES, PIECES_VALUES

# a JSON string (skipped whole, escapes included), or a container's opening or a separator
_STRING_OR_VALUE = re.compile(rb'("[^"\\]*(?:\\.[^"\\]*)*")|[{\[,]')


class JsonValues:
    """Sans-IO: `step(n)` reads up to `n` more strings and structural bytes; `count` is the values
    seen so far (containers and separators), `done` whether the whole body has been read."""

    __slots__ = ("_tokens", "count", "done")

    def __init__(self, raw: bytes) -> None:
        self._tokens: Iterator[re.Match[bytes]] = _STRING_OR_VALUE.finditer(raw)
        self.count = 0
        self.done = False

    def step(self, tokens: int) -> None:
        seen = 0
        for match in islice(self._tokens, tokens):
            seen += 1
            if match.lastindex is None:
                self.count += 1
        if seen < tokens:
            self.done = True


# every byte but those `value_bound` counts
_NOT_COUNTED = bytes(b for b in range(256) if b not in b"{[,")
# the bytes `value_bound` counts, the most frequent in an agent's body first
_COUNTED = (b",", b"{", b"[")
# a chunk is counted in pieces of this many bytes, by `bytes.replace` (whose counts are memchr's):
# a piece's copies come from memory a piece before freed (a whole 1 MB body's, fresh each turn,
# cost ~270 page faults)
_PIECE = 64 << 10
# a piece holding more counted bytes than one in this many is counted by `translate`
_SPARSE_GAP = 40


def value_bound(raw: bytes, start: int, end: int) -> int:
    """At least what `JsonValues` counts in `raw[start:end]`: its `{`, `[` and `,` bytes (in
    strings too). A short chunk: one pass deleting every other byte (`translate`, ~1.3 ns a byte
    whatever the bytes; three `count`s took twice as long). A long one, a piece at a time: the
    bytes three `replace`s delete, which skip from one counted byte to the next by memchr (~20
    ns a byte found and little besides: 3-5x faster where they are one in 48 bytes or fewer, as
    in an agent's body, its code and prose: one in ~76; slower past one in ~24). They stop past
    one in `_SPARSE_GAP` bytes of a piece, which `translate` then counts (having cost about a
    third of it)."""
    end = min(end, len(raw))
    if end - start <= _PIECE:
        chunk = raw if start == 0 and end == len(raw) else raw[start:end]
        return len(chunk.translate(None, _NOT_COUNTED))
    found = 0
    for at in range(start, end, _PIECE):
        piece = raw[at : min(at + _PIECE, end)]
        size = len(piece)
        most = size // _SPARSE_GAP
        rest = piece
        for counted in _COUNTED:
            # at most one more than may be left: deleting that many tells the piece is dense
            rest = rest.replace(counted, b"", most - (size - len(rest)) + 1)
            if size - len(rest) > most:
                found += len(piece.translate(None, _NOT_COUNTED))
                break
        else:
            found += size - len(rest)
    return found


def common_prefix(a: bytes, b: bytes) -> int:
    """How many first bytes `a` and `b` share: a bisection of `startswith` comparisons (memcmp),
    each over the part not yet compared, so about one pass over the shared bytes in all."""
    lo, hi = 0, min(len(a), len(b)) + 1  # a[:lo] == b[:lo]; a[:hi] != b[:hi] (or past the end)
    view = memoryview(b)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a.startswith(view[lo:mid], lo):
            lo = mid
        else:
            hi = mid
    return lo


class Shared(NamedTuple):
    """What a request body was found to share with `held`, the body held for its conversation's
    last turn (`value_bound` `values`; its list at `span` when known: gateway/ingress/slices.py
    `shared_with`): its first `prefix` bytes, and the held list's run (`held[span[0]:span[1]]`, a
    `[` and the held items) from `at` on (None: not found, or `span` unknown). Made once, when the
    body's values are counted (`value_bound_after`), and handed on to its read (`went_on`): ~1 MB
    of memcmp over bytes out of the cache, once instead of twice."""

    held: bytes
    values: int
    prefix: int
    span: tuple[int, int] | None
    at: int | None


def value_bound_after(raw: bytes, shared: Shared, most: int) -> int | None:
    """`value_bound` of the whole `raw`, from the bound of the held body it opens with or holds the
    list of (`shared`: an agent's next turn re-sends the last one's body up to the end of its
    transcript; Codex switching model moves it): the bytes they share count the same in both, so
    only the others are counted (compared at memcmp speed, ~10x faster than counting). None: more
    than `most` bytes would be counted (they share too little)."""
    held, prefix, span, at = shared.held, shared.prefix, shared.span, shared.at
    if span is not None and at is not None and prefix < span[0] <= span[1] and prefix <= at:
        # the held list's run, moved: shared besides the prefix, counted in neither body
        start, end = span
        run = end - start
        if len(held) + len(raw) - 2 * (prefix + run) > most:
            return None
        outside = value_bound(held, prefix, start) + value_bound(held, end, len(held))
        return shared.values - outside + value_bound(raw, prefix, at) + value_bound(raw, at + run, len(raw))
    if len(held) + len(raw) - 2 * prefix > most:
        return None
    return shared.values - value_bound(held, prefix, len(held)) + value_bound(raw, prefix, len(raw))


def offloads(values: int | None, size: int) -> bool:
    """Whether a body of `size` bytes goes to the worker thread (gateway/offload.py), decided once
    from the count `values_within_budget` made of it (`value_bound`; None: past that bound,
    counted exactly)."""
    return values is None or values >= OFFLOAD_VALUES or size >= OFFLOAD_BYTES


def parsed_in_pieces(values: int | None, size: int) -> bool:
    """Whether a body the worker thread parses is parsed in pieces (gateway/ingress/pieces.py)
    rather than by one orjson call, which holds the GIL (the event loop waits) throughout; from
    the same count as `offloads`."""
    return values is None or values >= PIECES_VALUES or size >= OFFLOAD_BYTES


def raw_parts(body: Any) -> int:
    """Content blocks, tools and messages the body's top-level lists hold, counted without
    decoding: an item with a `content` or `parts` list counts its length, any other item 1."""
    if type(body) is not dict:
        return 0
    total = 0
    for value in body.values():
        if type(value) is not list:
            if type(value) is KnownList:
                total += value.parts
            continue
        for item in value:  # `item_parts`, inline: a transcript has thousands of items
            kind = type(item)
            if kind is Known:
                total += item.parts
            elif kind is dict:
                parts = item.get("content")
                if type(parts) is not list:
                    parts = item.get("parts")
                total += len(parts) if type(parts) is list else 1
            else:
                total += 1
    return total


def item_parts(item: Any) -> int:
    """What `raw_parts` counts for one item (an item the decode memo found and left unparsed
    carries the count of its first sighting: gateway/ingress/memo.py `Known`)."""
    if type(item) is dict:
        parts = item.get("content")
        if type(parts) is not list:
            parts = item.get("parts")
        return len(parts) if type(parts) is list else 1
    return item.parts if type(item) is Known else 1


class Known:
    """In a body's transcript list, an item the decode memo found and left unparsed (its decoded
    value is in the memo's `Items.found`); `parts`: what `item_parts` counted for it when new.
    Immutable and shared: `known(parts)`."""

    __slots__ = ("parts",)

    def __init__(self, parts: int) -> None:
        self.parts = parts


_KNOWN = [Known(parts) for parts in range(64)]


class KnownList:
    """In a body read in parts, a top-level list whose JSON text was decoded before (an agent's
    tool definitions, the same every turn: gateway/ingress/tool_lists.py), left unparsed: `value`
    is what the dialect's decode made of it, `text` its JSON text (parsed again only to report a
    validation error of the whole request), `parts` what `raw_parts` counts for it and `nesting`
    how deep it nests (`errors.nesting`, the list at 1). Immutable and shared."""

    __slots__ = ("text", "value", "parts", "nesting")

    def __init__(self, text: bytes, value: Any, parts: int, nesting: int) -> None:
        self.text = text
        self.value = value
        self.parts = parts
        self.nesting = nesting


def known(parts: int) -> Known:
    """The `Known` of an item of `parts` parts (one object per count for the usual ones)."""
    return _KNOWN[parts] if parts < len(_KNOWN) else Known(parts)


def knowns(parts: list[int]) -> list[Known]:
    """`known` of each count (at C speed when every one is a usual count: a held transcript's
    thousand items)."""
    if not parts or max(parts) < len(_KNOWN):
        return list(map(_KNOWN.__getitem__, parts))
    return [known(n) for n in parts]
