"""Issuer affinity: a request inside an open tool loop goes first to the target that issued the
loop's continuity tokens, so signatures and encrypted reasoning keep working and nothing has to be
dropped or disabled. Pure functions of the request and the target order."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.transcript.model import (
    Continuity,
    Document,
    Image,
    Message,
    Reasoning,
    Request,
    Role,
    ServerToolCall,
    ServerToolResult,
    Text,
    ToolCall,
    ToolResult,
)
from gateway.transcript.target import Target


def open_loop(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """The assistant and tool messages of the tool loop still in progress: the transcript ends
    with tool results, and the loop began after the last user message. Empty when no loop is open
    (the next answer starts a fresh turn, which any target can take)."""
    if not messages or messages[-1].role is not Role.TOOL:
        return ()
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role is Role.USER:
            start = index + 1
            break
    return messages[start:]


def loop_continuity(request: Request) -> Iterator[Continuity]:
    """Continuity meta of the open loop's assistant turns, oldest first."""
    for message in open_loop(request.messages):
        if message.role is not Role.ASSISTANT:
            continue
        for block in message.blocks:
            match block:
                case (
                    Text(meta=meta)
                    | Reasoning(meta=meta)
                    | ToolCall(meta=meta)
                    | ServerToolCall(meta=meta)
                    | ServerToolResult(meta=meta)
                ):
                    if meta is not None:
                        yield meta
                case Image() | Document() | ToolResult():
                    pass
                case _:
                    raise TypeError(f"unknown block kind {type(block).__name__}")


def _issued(target: Target, meta: Continuity) -> bool:
    # exact issuer only: a token of unknown issuer (a wildcard scope) claims no affinity
    return meta.kind == target.kind and meta.scope == target.continuity_scope and meta.model == target.model


def prefer_issuer(targets: tuple[Target, ...], request: Request) -> tuple[Target, ...]:
    """`targets` with the issuer of the open loop's earliest continuity token moved to the front
    (the turn that opened the loop is the one a provider such as Anthropic checks); unchanged
    when no loop is open or no target issued its tokens."""
    for meta in loop_continuity(request):
        for index, target in enumerate(targets):
            if _issued(target, meta):
                return targets if index == 0 else (target, *targets[:index], *targets[index + 1 :])
    return targets


def last_issuer(targets: tuple[Target, ...], request: Request) -> Target | None:
    """The target that issued the latest continuity data in the conversation's assistant turns,
    if one of `targets` did: where the session was last served, as the transcript itself tells
    (a turn without any, such as plain chat text, says nothing and is passed over)."""
    for message in reversed(request.messages):
        if message.role is not Role.ASSISTANT:
            continue
        metas = [meta for block in message.blocks if (meta := getattr(block, "meta", None)) is not None]
        for meta in metas:
            for target in targets:
                if _issued(target, meta):
                    return target
        if metas:  # continuity of a target outside this group: no evidence for any of them
            return None
    return None
