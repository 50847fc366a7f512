"""A provider's rendered message list, held per conversation, so that an agent's next turn renders
only the messages it adds.

An agent resends its whole transcript every turn; the decode memo and the identity-keeping repair
passes hand the encoder the same Message objects for the part already sent
(gateway/ingress/memo_chain.py, gateway/repair/reasoning_policy.py). The wire items of a message
depend only on the message and the encoder's context (its dialect and target), so the items and
JSON text rendered for the previous turn's leading messages are this turn's too: the new text is
the held text up to the first message that differs, then the rendering of the rest. orjson writes
no whitespace, so the JSON of a list is `[` + the items' JSON joined by `,` + `]`, and a body that
embeds the text as an `orjson.Fragment` is byte for byte the body that embeds the items
(tests/providers/test_held_wire.py compares both for every family that uses it).

Keyed by the first message object (a conversation's opening, held alive by the entry, so its `id`
names no other object meanwhile); a hit also needs the same context and lead items. Only long
transcripts are held (a short one renders in microseconds), within a byte budget, oldest first out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress, count
from operator import is_not
from typing import Any

import orjson

from gateway.transcript.model import Message

_dumps = orjson.dumps

# below this many messages nothing is held: rendering them costs less than keeping them
MIN_MESSAGES = 16


@dataclass(slots=True)
class _Held:
    context: object
    lead: list[Any]
    messages: tuple[Message, ...]
    starts: list[int]  # each message's first item in `items`
    items: list[Any]  # the lead items, then every message's
    text: bytes  # orjson's JSON of `items`
    charge: int


class HeldWire:
    def __init__(self, budget: int) -> None:
        self._budget = budget  # bytes of held text, counted twice (the items are about as large)
        self._charge = 0
        self._held: dict[int, _Held] = {}
        self._lock = threading.Lock()  # large requests are encoded in worker threads

    def render(
        self,
        messages: tuple[Message, ...],
        context: object,
        lead: list[Any],
        encode: Callable[[int, Message, list[Any]], None],
    ) -> bytes:
        """The JSON array of the `lead` items, then the items `encode(position, message, out)`
        appends for each message. `encode`'s items must depend only on the message and `context`
        (its errors propagate; nothing is held then)."""
        if len(messages) < MIN_MESSAGES:
            items = list(lead)
            for position, message in enumerate(messages):
                encode(position, message, items)
            return _dumps(items)
        first = messages[0]
        with self._lock:
            held = self._held.get(id(first))
        kept = 0
        if held is not None and held.messages[0] is first and held.context == context and held.lead == lead:
            before = held.messages
            shared = min(len(before), len(messages))
            kept = next(compress(count(), map(is_not, before, messages)), shared)
            if kept * 2 < len(before):
                kept = 0  # another conversation that opens alike: finding the cut costs more
        if kept == 0:
            items = list(lead)
            starts = []
            for position, message in enumerate(messages):
                starts.append(len(items))
                encode(position, message, items)
            text = _dumps(items)
        else:
            assert held is not None
            cut = held.starts[kept] if kept < len(held.messages) else len(held.items)
            starts = held.starts[:kept]
            new: list[Any] = []
            for position in range(kept, len(messages)):
                starts.append(cut + len(new))
                encode(position, messages[position], new)
            items = held.items[:cut]
            items.extend(new)
            text = _join(held, cut, new)
        self._hold(first, _Held(context, lead, messages, starts, items, text, 2 * len(text)))
        return text

    def clear(self) -> None:
        with self._lock:
            self._held, self._charge = {}, 0

    def _hold(self, first: Message, held: _Held) -> None:
        with self._lock:
            gone = self._held.pop(id(first), None)
            if gone is not None:
                self._charge -= gone.charge
            if held.charge > self._budget:
                return
            self._held[id(first)] = held
            self._charge += held.charge
            while self._charge > self._budget:
                oldest = next(iter(self._held))
                self._charge -= self._held.pop(oldest).charge


def _join(held: _Held, cut: int, new: list[Any]) -> bytes:
    """`held.items[:cut] + new` as JSON, from the held text up to item `cut`."""
    text = held.text
    if cut == len(held.items):
        opening = memoryview(text)[:-1]  # `[` and the items, without the closing `]`
    else:
        # the held text is `[` P `,` R `]` where R is the JSON of the items from `cut` on
        opening = memoryview(text)[: len(text) - len(_dumps(held.items[cut:]))]
    if len(opening) <= 1:  # no item before the cut
        return _dumps(new)
    if not new:
        return b"".join((opening, b"]"))
    return b"".join((opening, b",", memoryview(_dumps(new))[1:]))
