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
(tests/providers/test_held_wire.py compares both for every family that uses it).

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

# appends the wire items of `messages[position]` to the list given
Encode = Callable[[tuple[Message, ...], int, list[Any]], None]

# below this many messages nothing is held: rendering them costs less than keeping them
MIN_MESSAGES = 16


@dataclass(slots=True)
class _Held:
    context: object
    lead: list[Any]
    messages: tuple[Message, ...]
    text: bytes  # orjson's JSON of the lead items, then every message's


def _text_held(held: _Held) -> int:
    return len(held.text)


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
        """The JSON array of the `lead` items, then the items `encode(messages, position, out)`
        appends for each message. `encode`'s items must depend only on `messages[position]` and
        `context` (a check against the message before may raise: it is made for every message
        not held; errors propagate, and nothing is held then)."""
        if len(messages) < MIN_MESSAGES:
            return _dumps(_items(messages, 0, list(lead), encode))
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
        if kept:
            assert held is not None
            text = _join(held, kept, _items(messages, kept, [], encode), encode)
        else:
            text = _dumps(_items(messages, 0, list(lead), encode))
        self._held.put(messages[0], _Held(context, lead, messages, text))
        return text

    def clear(self) -> None:
        self._held.clear()


def _items(
    messages: tuple[Message, ...],
    start: int,
    out: list[Any],
    encode: Encode,
) -> list[Any]:
    for position in range(start, len(messages)):
        encode(messages, position, out)
    return out


def _join(held: _Held, kept: int, new: list[Any], encode: Encode) -> bytes:
    """The held text up to the end of its first `kept` messages' items, then the `new` items.
    Where those end is found from the length of the rest: the held text is `[` P `,` R `]`, where
    R is the JSON of the items of the held messages from `kept` on, rendered again (the same
    items: they depend only on the messages and the context)."""
    text = held.text
    if kept == len(held.messages):
        end = len(text) - 1
    else:
        rest = _dumps(_items(held.messages, kept, [], encode))
        end = len(text) - 1 if rest == b"[]" else len(text) - len(rest)
    if end <= 1:  # no item before the cut
        return _dumps(new)
    if not new:
        return b"".join((memoryview(text)[:end], b"]"))
    return b"".join((memoryview(text)[:end], b",", memoryview(_dumps(new))[1:]))
