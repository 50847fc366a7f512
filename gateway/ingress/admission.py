"""A request body's admission: its JSON values counted before it is parsed, its lists' blocks
before it is decoded, and the decoded transcript against the caps (gateway/ingress/budget.py has
the counts themselves). Every dialect's route and count_tokens go through these, so a body that
would hold the event loop is refused in the dialect's envelope before it costs anything.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.config import ServerConfig
from gateway.ingress.budget import (
    JsonValues,
    Shared,
    offloads,
    parsed_in_pieces,
    raw_parts,
    value_bound,
    value_bound_after,
)
from gateway.ingress.errors import ClientError, parse_json_body
from gateway.ingress.pieces import parse_json_pieces
from gateway.offload import Offload
from gateway.transcript.model import Message, Request
from gateway.transcript.resume import Resumable

# a body's value count is made in steps, the event loop running between them: bytes per step of
# the bound, strings and structural bytes per step of the exact count (each a few ms)
_BOUND_STEP = 1 << 20
_COUNT_STEP = 20_000
# a body at most this long is bounded in one step (~1 ms): a step of a longer one counts a slice,
# whose copy cost as much again as the count (an agent's 1,000-message body, 1.1 MB: 0.86 ms in
# two steps, 0.47 whole)
_WHOLE_BOUND = 2 << 20


async def parse_within_budget(
    raw: bytes, limits: ServerConfig, skip: str | None = None, offload: Offload | None = None
) -> Any:
    """The parsed body, once it is known to be within the caps that bound its parse and decode:
    its JSON values (`values_within_budget`), then the blocks its lists hold (`check_parts`).
    `offload`: parsed and counted in a worker thread."""
    return await parse_counted(raw, limits, await values_within_budget(raw, limits), skip, offload)


async def parse_counted(
    raw: bytes,
    limits: ServerConfig,
    values: int | None,
    skip: str | None = None,
    offload: Offload | None = None,
) -> Any:
    """`parse_within_budget` for a body whose values `values_within_budget` counted already."""
    if offload is not None:
        pieces = parsed_in_pieces(values, len(raw))
        body, parts = await offload.run(_parse_and_count, raw, limits.max_json_depth, skip, pieces)
        check_parts(body, limits, parts=parts)
    else:
        body = parse_json_body(raw, limits.max_json_depth, skip)
        check_parts(body, limits, values)
    return body


async def values_within_budget(raw: bytes, limits: ServerConfig, held: Shared | None = None) -> int | None:
    """Refuse a body of more JSON values than the cap before it is parsed: counted in steps that
    let other requests run, and only when one C-speed count cannot tell. Returns the C-speed
    count (`value_bound` of the whole body), when it was made whole. `held`: what this body shares
    with a held one, and that one's count (`DecodeMemo.held_bound`): the same count, from the
    bytes they do not share."""
    cap = limits.max_json_values
    bound = None if held is None else value_bound_after(raw, held, _BOUND_STEP)
    if bound is None and len(raw) <= _WHOLE_BOUND:
        bound = value_bound(raw, 0, len(raw))
    elif bound is None:
        bound = 0
        for start in range(0, len(raw), _BOUND_STEP):
            if start:
                await asyncio.sleep(0)
            bound += value_bound(raw, start, start + _BOUND_STEP)
            if bound > cap:
                break
    if bound > cap:
        values = JsonValues(raw)
        while not values.done:
            values.step(_COUNT_STEP)
            if values.count > cap:
                raise ClientError(
                    400,
                    f"the request body holds more than {cap} JSON values ([server] max_json_values)",
                    code="too_many_values",
                )
            await asyncio.sleep(0)
        return None
    return bound


def parse_short(raw: bytes, limits: ServerConfig, min_bytes: int) -> tuple[Any] | None:
    """A body shorter than the decode memo's `min_bytes` (the bench's small request, a one-shot
    question), parsed and checked as the exchange's steps would (gateway/exchange.py `_run`: the
    memo holds nothing for it, `values_within_budget` bounds it in one step, it is not offloaded,
    `parse_transcript` and `parse_counted` parse it whole), without their coroutines and the
    memo's calls: `(body,)`. None: those steps take it (a longer body; a bound past the cap,
    counted exactly; an offloaded one). tests/exchange/test_short_body.py compares both."""
    size = len(raw)
    if size >= min_bytes:
        return None
    values = value_bound(raw, 0, size)
    if values > limits.max_json_values or offloads(values, size):
        return None
    body = parse_json_body(raw, limits.max_json_depth)
    check_parts(body, limits, values)
    return (body,)


def check_parts(body: Any, limits: ServerConfig, values: int | None = None, parts: int | None = None) -> None:
    """Refuse a body whose lists hold more blocks than the caps allow, before it is decoded
    (`check_size` checks the decoded transcript again: a kept history adds to it). `values`: the
    C-speed bound of the whole body's values (`values_within_budget`), when made; `parts`: the
    body's `raw_parts`, when counted already."""
    most = limits.max_blocks + limits.max_messages + limits.max_tools
    if parts is None:
        # what raw_parts counts (list items, a content list's for its message) is at most the
        # body's brackets and commas: a body whose bound is within the caps needs no count
        parts = raw_parts(body) if values is None or values > most else 0
    if parts > most:
        raise ClientError(
            400,
            f"the request holds {parts} messages, content blocks and tools; this gateway takes at most "
            f"{limits.max_blocks} blocks ([server] max_blocks), {limits.max_messages} messages and "
            f"{limits.max_tools} tools",
            param="messages",
            code="too_many_blocks",
        )


def _parse_and_count(raw: bytes, max_depth: int, skip: str | None, pieces: bool) -> tuple[Any, int]:
    # the worker thread: a long parse in pieces, the loop runs between them
    body = parse_json_pieces(raw, max_depth, skip) if pieces else parse_json_body(raw, max_depth, skip)
    return body, raw_parts(body)


def check_size(request: Request, limits: ServerConfig) -> int:
    """Refuse a transcript beyond the configured caps before any pass runs over it; its blocks."""
    if len(request.messages) > limits.max_messages:
        raise ClientError(
            400,
            f"the conversation has {len(request.messages)} messages; this gateway takes at most "
            f"{limits.max_messages} ([server] max_messages)",
            param="messages",
            code="too_many_messages",
        )
    if len(request.tools) > limits.max_tools:
        raise ClientError(
            400,
            f"{len(request.tools)} tools; this gateway takes at most {limits.max_tools} ([server] max_tools)",
            param="tools",
            code="too_many_tools",
        )
    blocks = message_blocks(request.messages) + len(request.system)
    if blocks > limits.max_blocks:
        raise ClientError(
            400,
            f"the conversation has {blocks} content blocks; this gateway takes at most "
            f"{limits.max_blocks} ([server] max_blocks)",
            param="messages",
            code="too_many_blocks",
        )
    return blocks


# a conversation's blocks so far: its next turn counts only the new messages'
# (gateway/transcript/resume.py)
_BLOCKS_SO_FAR = Resumable()


def message_blocks(messages: tuple[Message, ...]) -> int:
    """The blocks the messages hold."""
    done, held = _BLOCKS_SO_FAR.find(messages, None)
    blocks = sum(len(m.blocks) for m in (messages[done:] if done else messages))
    if held is not None:
        blocks += held
    _BLOCKS_SO_FAR.hold(messages, None, blocks)
    return blocks
