"""Put recorded turns back into an incoming transcript (DESIGN.md 4.6). Pure: the caller fetches
the records for `lookup_keys` and hands them in.

A recorded turn replaces the client's copy only when the client's visible content (text, tool
names and arguments) still matches what the gateway returned: an edited turn keeps the client's
content and loses its tokens, which the provider would reject as modified anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter, eq

import orjson
from cachetools import LRUCache

from gateway.continuity.codec import decode_turn
from gateway.continuity.keys import call_key_prefix, normalize_text, text_key_prefix, text_turn_key
from gateway.repair.report import Repair
from gateway.transcript.model import Block, Message, Request, Role, Text, ToolCall, replace
from gateway.transcript.resume import Resumable

# Role's members, looked up once: an enum member's lookup costs ~75 ns, per message here
_ASSISTANT = Role.ASSISTANT
_ROLE = attrgetter("role")


# a conversation's keys so far (a message's key depends on it and the assistant turns before it)
# and the distinct ones among them: its next turn computes only the new messages'
# (gateway/transcript/resume.py)
_KEYS_SO_FAR = Resumable()


def keyed(request: Request, session: str, tenant: str = "") -> tuple[tuple[str | None, ...], dict[str, None]]:
    """`message_keys`, and the distinct keys among them in order (a dict as an ordered set: the
    caller must not change it, it is held for the next turn)."""
    messages = request.messages
    context = (session, tenant)
    done, held = _KEYS_SO_FAR.find(messages, context)
    keys: list[str | None] = [] if held is None else list(held[0])
    distinct: dict[str, None] = {} if held is None else held[1]
    start = len(keys)
    # a turn with a call is found by its first call's key (`lookup_key`), made here: an agent's
    # turns are mostly calls; a text turn's by `text_turn_key` (its position: the keys before it)
    calls, texts = call_key_prefix(tenant), ""  # texts: made at the first text turn
    assistant, call_kind, keep = _ASSISTANT, ToolCall, keys.append
    for message in messages[done:] if done else messages:
        if message.role is assistant:
            blocks = message.blocks
            for block in blocks:
                if type(block) is call_kind:
                    keep(calls + block.id)
                    break
            else:
                texts = texts or text_key_prefix(session, tenant)
                keep(text_turn_key(texts, len(keys), blocks))
    if len(keys) > start:  # a small request (no assistant turn) skips this
        added = dict.fromkeys(keys[start:])  # in order, once each (C speed)
        added.pop(None, None)
        if added and distinct:  # a turn going on: its few new keys
            added = {key: None for key in added if key not in distinct}
        if added:
            distinct = {**distinct, **added} if distinct else added  # a held dict never changes
    found = (tuple(keys), distinct)
    _KEYS_SO_FAR.hold(messages, context, found)
    return found


def message_keys(request: Request, session: str, tenant: str = "") -> tuple[str | None, ...]:
    """The lookup key of every assistant message, in order (None: nothing to look up)."""
    return keyed(request, session, tenant)[0]


def lookup_keys(request: Request, session: str, tenant: str = "") -> list[str]:
    """The distinct keys to fetch, in order."""
    return list(keyed(request, session, tenant)[1])


def _arguments(raw: str) -> str:
    try:
        return orjson.dumps(orjson.loads(raw), option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONDecodeError:
        return raw.strip()


def visible(blocks: tuple[Block, ...]) -> tuple[str, tuple[tuple[str, str, str], ...]]:
    """What a client sees of a turn, normalized the way clients are known to reformat it."""
    text = normalize_text("".join(b.text for b in blocks if type(b) is Text))
    calls = tuple((b.id, b.name, _arguments(b.arguments)) for b in blocks if type(b) is ToolCall)
    return text, calls


class _Turn:
    """A record decoded (`stored`), and the last client copy it was compared with (held, and
    compared by identity) with the verdict: an agent re-sends its history every turn,
    and the decode memo hands back the same blocks for the same bytes, so each record's
    comparison is made once, not every turn (the verdict is a pure function of the two)."""

    __slots__ = ("size", "stored", "last")

    def __init__(self, raw: bytes) -> None:
        # the record, its decoded blocks and the client copy held, each about as much again
        self.size = 3 * len(raw) + 256
        self.stored = decode_turn(raw)
        # the client copy last compared, and the verdict (one tuple: replaced whole)
        self.last: tuple[tuple[Block, ...] | None, bool] = (None, False)

    def restores(self, blocks: tuple[Block, ...]) -> bool:
        """Whether the record goes back in place of the client's `blocks`: it differs from them
        (tokens the client dropped) while the client's visible content is the same."""
        last = self.last
        if last[0] is blocks:
            return last[1]
        stored = self.stored
        same = stored is not None and stored != blocks and visible(stored) == visible(blocks)
        self.last = (blocks, same)
        return same


# records decoded, by their bytes: an agent's every request restores its whole history, whose
# records are the same from turn to turn (bounded by the records' bytes; a pure function's cache)
_TURNS: LRUCache[bytes, _Turn] = LRUCache(maxsize=16 << 20, getsizeof=lambda entry: entry.size)


def _decoded(raw: bytes) -> _Turn:
    entry = _TURNS.get(raw)
    if entry is None:
        entry = _TURNS[raw] = _Turn(raw)
    return entry


# a conversation's restore so far (each assistant message's record, what it became, the repairs,
# whether any changed), resumed on its next turn while the records of the messages it shares are
# the same bytes: what a message becomes depends only on it and its record
_RESTORED = Resumable()


def restore(
    request: Request,
    records: Mapping[str, bytes | None],
    session: str,
    tenant: str = "",
    keys: tuple[str | None, ...] | None = None,
) -> tuple[Request, list[Repair]]:
    """`keys`: `message_keys(request, session, tenant)` when the caller computed them already.
    The records are the store's at this turn (the truth across workers: one may have expired or
    been rewritten since the last turn), each compared with the one held (C speed) before the
    held outcome stands for its message."""
    if not any(records.values()):  # nothing recorded (a conversation the gateway has not served)
        if keys is not None:
            # held as the walk's outcome: the conversation's next turn, whose last answer is its
            # first record, walks only what follows (a 1,000-message warm turn: ~0.15 ms less)
            context = (session, tenant)
            _RESTORED.hold(request.messages, context, ((None,) * len(keys), request.messages, (), False))
        return request, []
    if keys is None:
        keys = message_keys(request, session, tenant)
    found = tuple(map(records.get, keys))  # a key of None is no record's
    context = (session, tenant)
    done, held = _RESTORED.find(request.messages, context)
    if held is not None and (len(held[0]) > len(found) or not all(map(eq, held[0], found[: len(held[0])]))):
        done, held = 0, None  # a record the held outcome came from is not this turn's
    if held is None:
        messages: list[Message] = []
        repairs: list[Repair] = []
        changed = False
    else:
        messages, repairs, changed = [*held[1]], [*held[2]], held[3]
    position = -1 if held is None else len(held[0]) - 1
    for message in request.messages[done:] if done else request.messages:
        if message.role is _ASSISTANT:
            position += 1
            raw = found[position]
            turn = _decoded(raw) if raw else None
            if turn is not None and turn.restores(message.blocks):
                assert turn.stored is not None
                messages.append(Message(_ASSISTANT, turn.stored))
                repairs.append(Repair("continuity_restored"))
                changed = True
                continue
        messages.append(message)
    out = tuple(messages)
    _RESTORED.hold(request.messages, context, (found[: position + 1], out, tuple(repairs), changed))
    if not changed:
        return request, repairs
    return replace(request, messages=out), repairs
