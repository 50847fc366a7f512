"""One request's transcript items as the decode memo found them (gateway/ingress/memo.py): each
item's decoded value, or what decoding a new one keeps; and what the memo keeps of a request
(`_Turn`, `_FirstSight`)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import orjson

from gateway.ingress.budget import Known
from gateway.ingress.errors import check_depth

if TYPE_CHECKING:
    from gateway.ingress.memo import DecodeMemo

T = TypeVar("T")


class Items(Generic[T]):
    """One request's transcript items, as `DecodeMemo.items` found them."""

    __slots__ = ("_memo", "_keys", "_parts", "_body", "_turn", "_record", "found", "new_from")

    def __init__(
        self,
        memo: DecodeMemo,
        keys: list[tuple[str, bytes] | None],
        found: list[T | None],
        parts: list[int],
        body: bytes | None = None,
        turn: _Turn | None = None,
    ) -> None:
        self._memo = memo
        self._keys = keys
        self._parts = parts
        # the raw body, when found items were left unparsed (`DecodeMemo.split`) or read typed
        self._body = body
        self._turn = turn  # where new items go on probation (None: kept at once, or nowhere)
        self._record: list[T | None] | None = None  # a held list's decoded items, by index
        self.found = found  # per item: its decoded value, or None when it is new
        self.new_from = 0  # no item before this index is new (a held list's: memo_chain.py)

    def decode(self, index: int, decode: Callable[..., T], *args: Any) -> T:
        """Item `index` decoded: as found, or by `decode(*args)` and then kept (a decode that
        raises keeps nothing: errors are reported with the item's place, which the memo does not
        know)."""
        value = self.found[index]
        if value is None:
            value = decode(*args)
            if self._record is not None:  # a held list's (gateway/ingress/memo_chain.py)
                self._record[index] = value
            key = self._keys[index]
            if key is not None:
                self._keep_under(key, value, self._parts[index])
        return value

    def _keep_under(self, key: tuple[str, bytes], value: T, part: int) -> None:
        """A new item kept under its key: on probation with the turn, or at once."""
        turn = self._turn
        if turn is not None:
            turn.entries.append((key, value, part))
        elif self._memo._admit_after == 1:
            self._memo._keep(key, value, part)

    def decode_each(self, start: int, args: list[Any], decode: Callable[..., T], *extra: Any) -> list[T]:
        """Items `start` on: as found, or `decode(args[i], start + i, *extra)` for a new one
        (`args[i]`: what it decodes from) and then kept, as `decode` does one at a time (a long
        transcript's thousand calls: the method call an item was a third of its decode)."""
        found = self.found
        out: list[T] = []
        append = out.append
        try:
            for index, arg in enumerate(args, start):
                value = found[index]
                append(decode(arg, index, *extra) if value is None else value)
        finally:  # those before one that raised are kept, as `decode` keeps them
            self.kept(start, out)
        return out

    def kept(self, start: int, values: list[T]) -> None:
        """Items `start`, `start + 1`, ... decoded to `values`: each new one (not found) kept as
        `decode` keeps what it decodes (recorded by index for a held list; under its key)."""
        end = start + len(values)
        new = self.found[start:end]
        record = self._record
        if record is not None:
            if new.count(None) == len(values):  # a long transcript's first sight: at C speed
                record[start:end] = values
            else:
                for index, (value, was) in enumerate(zip(values, new, strict=True), start):
                    if was is None:
                        record[index] = value
        keys = self._keys[start:end]
        if keys.count(None) == len(keys):  # kept nowhere else (a first sight, a decode outside the memo)
            return
        parts = self._parts
        for index, (key, value, was) in enumerate(zip(keys, values, new, strict=True), start):
            if key is not None and was is None:
                self._keep_under(key, value, parts[index])

    def parsed_from(self, body: bytes) -> None:
        """The items were read into a dialect's typed items from `body` (gateway/ingress/typed_items.py):
        a validation error of the whole request is reported from `body` parsed again (`whole`)."""
        self._body = body

    def check_depth(self, values: list[Any], max_depth: int) -> None:
        """Depth-check the new items of `values` (the body's list), each at its place (the body 1,
        the list 2, an item 3)."""
        start = self.new_from
        for value, decoded in zip(islice(values, start, None), islice(self.found, start, None), strict=True):
            if decoded is None:
                check_depth(value, max_depth, start=3)

    def whole(self, body: Any) -> Any:
        """`body` with every item parsed: what a validation error of the whole request is
        reported from (a found item stands unparsed in `body`)."""
        if self._body is None:
            return body
        try:
            return orjson.loads(self._body)
        except orjson.JSONDecodeError:  # nested past what orjson reads at once: its parts were read
            return body


class _Turn:
    """The new items of one request, kept together on probation under the request's opening
    items; once protected, they join the conversation's protected items (one `_Turn` per opening:
    the unit of the LRU, which a hit on any of its items touches). `entries`: their keys, what
    they decoded to and their raw parts, as decoding goes (a decode that raised leaves its item
    out); once protected, `keys` only. `size` bounds what they hold, counted when they came."""

    __slots__ = ("entries", "keys", "size", "opening")

    def __init__(self, size: int) -> None:
        self.entries: list[tuple[tuple[str, bytes], Any, int]] = []
        self.keys: list[tuple[str, bytes]] = []
        self.size = size
        self.opening: tuple[str, bytes, bytes] = ("", b"", b"")


class _FirstSight:
    """A request whose opening was seen for the first time, on probation whole: its body (held,
    not copied) and what its items decoded to (`records`, by index: None for an item whose decode
    raised or was never asked for), read in parts only if
    a request opening the same way follows (`DecodeMemo._recall`). `size` counts the body and
    what it decoded to as a turn of all its items would be."""

    __slots__ = ("body", "field", "parts", "records", "size", "span", "knowns", "values", "narrow")
    entries = ()  # none is found by its bytes yet

    def __init__(self, body: bytes, field: str, parts: list[int], size: int) -> None:
        self.body = body
        self.field = field  # the body's field holding the list
        self.parts = parts
        self.records: list[Any] = [None] * len(parts)
        self.size = size
        # where the list begins in `body` and where its last item ends (gateway/ingress/slices.py
        # `list_span`), once known
        self.span: tuple[int, int] | None = None
        self.knowns: list[Known] | None = None  # `known` of each part count, once made
        # the body's `value_bound` (None: not counted whole): the next turn's body opens with most
        # of it and is counted from it (`DecodeMemo.held_bound`)
        self.values: int | None = None
        # `narrow(body)` (gateway/ingress/memo_size.py) when scanned (None: not): the next turn's
        # body shares its list's bytes and scans only the rest
        self.narrow: bool | None = None
