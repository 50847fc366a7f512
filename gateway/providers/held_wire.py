"""A provider's rendered message list, held per conversation, so that an agent's next turn renders only
the messages it adds.

An agent resends its whole transcript every turn; the decode memo and the identity-keeping repair
passes hand the encoder the same Message objects for the part already sent
(gateway/ingress/memo_chain.py, gateway/repair/reasoning_policy.py). The wire items of a message
depend only on the message and the encoder's context (its dialect and target), so the items and JSON
text rendered for the previous turn's leading messages are this turn's too: the new text is the held
text up to the end of the first message that differs, then the rendering of the rest. orjson writes
no whitespace, so the JSON of a list is `[` + the items' JSON joined by `,` + `]`, and a body that
embeds the text as an `orjson.Fragment` is byte for byte the body that embeds the items
(tests/providers/test_held_wire.py compares both for every family that uses it). The text is
not joined on its own when a body is written around it (`Rendered.dumps`): the body is written with
a NUL in the list's place and the pieces (the held text's bytes, the new items') are copied once,
into it; the body is held (a ~1 MB transcript is copied once a turn, not twice).

Keyed by the first message object (a conversation's opening, held alive by the entry, so its `id`
names no other object meanwhile); a hit also needs the same context and lead items. Only long
transcripts are held (a short one renders in microseconds), within a byte budget, oldest first out.
Only bytes are held, not the items: a long-lived object graph per message would make every
collection of the garbage collector's oldest generation walk it (the cold turns paid for it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress, count
from operator import is_not
from typing import Any

import orjson

from gateway.transcript.model import Message
from gateway.transcript.resume import ByOpening, shares_lead

_dumps = orjson.dumps

# appends the wire items of `messages[start:]` to the list given, in order (one call a list, not
# one a message: a cold 1,000-message turn paid ~0.2 ms in calls)
Encode = Callable[[tuple[Message, ...], int, list[Any]], None]

# below this many messages nothing is held: rendering them costs less than keeping them
MIN_MESSAGES = 16


# stands for the message list in a body orjson writes around it (`Rendered.dumps`): orjson writes
# no NUL byte of its own (a control character in a string is escaped), so the one NUL in its text
# is where the list goes
PLACE = orjson.Fragment(b"\0")


@dataclass(slots=True)
class _Held:
    context: object
    lead: list[Any]
    messages: tuple[Message, ...]
    # the JSON text of the lead items, then every message's: `wire[start:end]` (`wire`: that text,
    # or the whole body it was sent in, which it keeps alive)
    wire: bytes
    start: int
    end: int

    def text(self) -> memoryview:
        return memoryview(self.wire)[self.start : self.end]


def _text_held(held: _Held) -> int:
    return len(held.wire)


class Rendered:
    """A message list rendered (`HeldWire.rendered`): the pieces its JSON text is joined from, not
    yet joined, so that the body holding it copies them once (`dumps`)."""

    __slots__ = ("_pieces", "_fresh", "_wire", "_messages", "_context", "_lead")

    def __init__(
        self,
        pieces: tuple[Any, ...],
        wire: HeldWire | None,
        messages: tuple[Message, ...],
        context: object,
        lead: list[Any],
        items: list[Any] | None = None,
    ) -> None:
        self._pieces = pieces
        # the whole list's items, not yet written (a list rendered afresh: `pieces` is empty)
        self._fresh = items
        self._wire = wire  # where the text is held once made (None: not held)
        self._messages = messages
        self._context = context
        self._lead = lead

    def text(self) -> bytes:
        """The list's JSON text."""
        pieces = self._pieces if self._fresh is None else (_dumps(self._fresh),)
        text = pieces[0] if len(pieces) == 1 and type(pieces[0]) is bytes else b"".join(pieces)
        self._hold(text, 0, len(text))
        return text

    def dumps(self, body: dict[str, Any]) -> bytes:
        """`orjson.dumps(body)`, `body` holding `PLACE` where the list goes: the body with the
        list's text in that place, the list's pieces copied once, into the body. A list rendered
        afresh is written with the body, in one `orjson.dumps` (its text and then the body's
        made a second copy of a long transcript's bytes: ~5.6 MB for 5,000 messages); where it
        lies in the body is where the body written around `PLACE` holds the NUL. A short list,
        held nowhere, is written with the body at once: its place is never looked for."""
        if self._wire is None and self._fresh is not None:
            wire = _dumps_in_place(body, self._fresh)
            if wire is not None:
                return wire
        out = orjson.dumps(body)
        at = out.find(b"\0")
        if at < 0 or out.find(b"\0", at + 1) >= 0:  # a NUL of a fragment's own: not its place
            for name, value in body.items():
                if value is PLACE:
                    body[name] = orjson.Fragment(self.text())
            return orjson.dumps(body)
        after = len(out) - at - 1  # the body's bytes after the list
        wire = None if self._fresh is None else _dumps_in_place(body, self._fresh)
        if wire is None:
            if self._fresh is not None:
                self._pieces, self._fresh = (_dumps(self._fresh),), None
            view = memoryview(out)
            wire = b"".join((view[:at], *self._pieces, view[at + 1 :]))
        self._hold(wire, at, len(wire) - after)
        return wire

    def _hold(self, wire: bytes, start: int, end: int) -> None:
        if self._wire is not None:
            held = _Held(self._context, self._lead, self._messages, wire, start, end)
            self._wire._held.put(self._messages[0], held)


class HeldWire:
    def __init__(self, budget: int) -> None:
        self._held: ByOpening[_Held] = ByOpening(budget, _text_held)  # bytes of held text

    def render(
        self,
        messages: tuple[Message, ...],
        context: object,
        lead: list[Any],
        encode: Encode,
    ) -> bytes:
        """The JSON array of the `lead` items, then the items `encode(messages, start, out)`
        appends for the messages from `start` on. Each message's items must depend only on that
        message and `context` (a check against the message before may raise: it is made for
        every message not held; errors propagate, and nothing is held then)."""
        return self.rendered(messages, context, lead, encode).text()

    def rendered(
        self,
        messages: tuple[Message, ...],
        context: object,
        lead: list[Any],
        encode: Encode,
    ) -> Rendered:
        """`render`, its text not yet joined: held once joined (`Rendered.text`, `Rendered.dumps`)."""
        if len(messages) < MIN_MESSAGES:
            return Rendered((), None, messages, context, lead, _items(messages, 0, list(lead), encode))
        held = self._held.get(messages[0])
        kept = 0
        if (
            held is not None
            and held.messages[0] is messages[0]
            and held.context == context
            and held.lead == lead
        ):
            before = held.messages
            kept = (
                len(before)
                if shares_lead(before, messages)
                else next(compress(count(), map(is_not, before, messages)), min(len(before), len(messages)))
            )
            if kept * 2 < len(before):
                kept = 0  # most of the held list is gone: finding the cut costs more than it saves
        if not kept:
            return Rendered((), self, messages, context, lead, _items(messages, 0, list(lead), encode))
        assert held is not None
        pieces = _join(held, kept, _items(messages, kept, [], encode), encode)
        return Rendered(pieces, self, messages, context, lead)

    def clear(self) -> None:
        self._held.clear()


def _dumps_in_place(body: dict[str, Any], items: list[Any]) -> bytes | None:
    """`orjson.dumps(body)` with `items` in the place of `PLACE`; None when orjson refuses it
    (the list one level deeper than written alone: past orjson's nesting limit, the caller writes
    the list alone, as before). `body` is left as it was."""
    # a loop, not `next()` over a generator: one left unfinished is closed by raising
    # GeneratorExit in it, on every request
    for name, value in body.items():
        if value is PLACE:
            body[name] = items
            try:
                return orjson.dumps(body)
            except orjson.JSONEncodeError:
                return None
            finally:
                body[name] = PLACE
    return None  # not a field of the body's own


def _items(
    messages: tuple[Message, ...],
    start: int,
    out: list[Any],
    encode: Encode,
) -> list[Any]:
    encode(messages, start, out)
    return out


def _join(held: _Held, kept: int, new: list[Any], encode: Encode) -> tuple[Any, ...]:
    """The pieces of the held text up to the end of its first `kept` messages' items, then the
    `new` items. Where those end is found from the length of the rest: the held text is `[` P `,`
    R `]`, where R is the JSON of the items of the held messages from `kept` on, rendered again
    (the same items: they depend only on the messages and the context)."""
    text = held.text()
    if kept == len(held.messages):
        end = len(text) - 1
    else:
        rest = _dumps(_items(held.messages, kept, [], encode))
        end = len(text) - 1 if rest == b"[]" else len(text) - len(rest)
    if end <= 1:  # no item before the cut
        return (_dumps(new),)
    if not new:
        return (text[:end], b"]")
    return (text[:end], b",", memoryview(_dumps(new))[1:])
