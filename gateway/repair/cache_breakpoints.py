"""At most as many prompt-cache breakpoints as the provider takes (Anthropic: 4 per request,
"A maximum of 4 blocks with cache_control may be provided").

The provider reads a request as tools, then system, then messages; the breakpoints kept are the
last ones in that order, because each covers the whole prefix before it: the latest breakpoints
cache the longest prefixes, which is what an agent loop re-reads on its next turn. Each one
removed is counted (`cache_breakpoint_dropped`); the content itself is untouched.
"""

from __future__ import annotations

from typing import Any

from gateway.repair.report import Repair
from gateway.transcript.model import (
    Document,
    Image,
    Message,
    Reasoning,
    ServerToolCall,
    ServerToolResult,
    Text,
    ToolCall,
    ToolResult,
    ToolSpec,
    replace,
)
from gateway.transcript.target import Capabilities

Limited = tuple[tuple[ToolSpec, ...], tuple[Text, ...], tuple[Message, ...], list[Repair]]


def _cached(block: object) -> bool:
    match block:
        case Text(cache=cache) | Image(cache=cache) | Document(cache=cache):
            return cache is not None
        case ToolCall(cache=cache) | ToolResult(cache=cache):
            return cache is not None
        case Reasoning() | ServerToolCall() | ServerToolResult():
            return False
        case _:
            raise TypeError(f"unknown block kind {type(block).__name__}")


def limit_cache_breakpoints(
    tools: tuple[ToolSpec, ...], system: tuple[Text, ...], messages: tuple[Message, ...], caps: Capabilities
) -> Limited:
    """(tools, system, messages, repairs) with the earliest breakpoints beyond the provider's
    limit removed; the inputs themselves when nothing is over it."""
    limit = caps.max_cache_breakpoints
    if limit is None:
        return tools, system, messages, []
    total = (
        sum(t.cache is not None for t in tools)
        + sum(b.cache is not None for b in system)
        + sum(_cached(b) for m in messages for b in m.blocks)
    )
    excess = total - limit
    if excess <= 0:
        return tools, system, messages, []
    repairs = [Repair("cache_breakpoint_dropped") for _ in range(excess)]

    def strip(item: Any) -> Any:  # any block or tool with a `cache` field
        nonlocal excess
        if excess > 0 and getattr(item, "cache", None) is not None:
            excess -= 1
            return replace(item, cache=None)
        return item

    tools = tuple(strip(t) for t in tools)
    system = tuple(strip(b) for b in system)
    out: list[Message] = []
    for message in messages:
        if excess <= 0:
            out.append(message)
            continue
        blocks = tuple(strip(b) for b in message.blocks)
        out.append(message if blocks == message.blocks else Message(message.role, blocks))
    return tools, system, tuple(out), repairs
