"""Server-tool blocks and citations for a client whose dialect has no such blocks (Chat
Completions, the NDJSON events) or not for their issuer (a Responses client and Anthropic's web
search): the same answer with those blocks as text, so nothing the provider said is lost. Those
of the dialect's own issuer (`native`) pass to its encoder as they are. The recorded turn keeps
the blocks themselves (the wrapper sits between the relay and the dialect's encoder)."""

from __future__ import annotations

from collections.abc import Callable

from gateway.ingress.base import StreamEncoder
from gateway.transcript.events import BlockDelta, BlockKind, BlockStart, BlockStop, Event, UpstreamError
from gateway.transcript.model import (
    AssistantTurn,
    Block,
    Continuity,
    ServerToolCall,
    ServerToolResult,
    Text,
    replace,
)
from gateway.transcript.render import call_text, citations_text, result_text

# after a rendered server-tool block: dialects that join an answer's text blocks into one
# content string (Chat) keep them apart
BREAK = "\n\n"


class ServerToolsAsText:
    """A StreamEncoder in front of another: server tool calls and results arrive at it as text
    blocks, citations as a sources list at the end of the text they annotate."""

    __slots__ = ("_inner", "_native", "_calls", "_passed", "content_type", "keepalive_seconds", "delta")

    def __init__(self, inner: StreamEncoder, native: str | None = None) -> None:
        self._inner = inner
        self._native = native  # the provider kind whose blocks the dialect carries as they are
        self._calls: dict[int, tuple[str, str, list[str]]] = {}  # index -> (id, name, input)
        self._passed: set[int] = set()  # native results: their stop goes to the encoder too
        self.content_type = inner.content_type
        self.keepalive_seconds = inner.keepalive_seconds
        # what `event` does for a BlockDelta, without a call of this wrapper in between (the
        # relay's per-chunk call): the inner encoder's own while no server tool call is open
        # (nearly always), this wrapper's while one gathers its input
        self.delta: Callable[[BlockDelta], bytes | None] = inner.event

    def start(self) -> bytes:
        return self._inner.start()

    def event(self, event: Event) -> bytes | None:
        t = type(event)
        if t is BlockDelta:  # nearly every event: one test
            if event.index in self._calls:
                self._calls[event.index][2].append(event.text)
                return None
            return self._inner.event(event)
        if t is BlockStart and event.kind is BlockKind.SERVER_TOOL_CALL:
            # its issuer is known when it stops: it goes out whole then (providers stream one
            # such block at a time)
            self._calls[event.index] = (event.id, event.name, [])
            self.delta = self.event
            return None
        if t is BlockStart and event.kind is BlockKind.SERVER_TOOL_RESULT:
            assert event.result is not None  # the assembler's contract
            if self._is_native(event.result.meta):
                self._passed.add(event.index)
                return self._inner.event(event)
            return self._join(
                BlockStart(event.index, BlockKind.TEXT),
                BlockDelta(event.index, result_text(event.result) + BREAK),
            )
        if t is BlockStop:
            call = self._calls.pop(event.index, None)
            if call is not None:
                if not self._calls:
                    self.delta = self._inner.event
                call_id, name, parts = call
                if self._is_native(event.meta):
                    start = BlockStart(event.index, BlockKind.SERVER_TOOL_CALL, call_id, name)
                    return self._join(start, BlockDelta(event.index, "".join(parts)), event)
                text = call_text(ServerToolCall(call_id, name, "".join(parts))) + BREAK
                start = BlockStart(event.index, BlockKind.TEXT)
                return self._join(start, BlockDelta(event.index, text), BlockStop(event.index))
            if event.citations and not all(self._is_native(c.meta) for c in event.citations):
                return self._join(
                    BlockDelta(event.index, "\n\n" + citations_text(event.citations)),
                    replace(event, citations=()),
                )
        return self._inner.event(event)

    def _is_native(self, meta: Continuity | None) -> bool:
        return self._native is not None and meta is not None and meta.kind == self._native

    def _join(self, *events: Event) -> bytes | None:
        out = [chunk for chunk in (self._inner.event(e) for e in events) if chunk is not None]
        return b"".join(out) if out else None

    def finish(self) -> bytes:
        return self._inner.finish()

    def error(self, error: UpstreamError) -> bytes:
        return self._inner.error(error)

    def keepalive(self) -> bytes:
        return self._inner.keepalive()


def textual_turn(turn: AssistantTurn, native: str | None = None) -> AssistantTurn:
    """A whole answer with its server-tool blocks and citations as text, but those of `native`
    (the fold of the above)."""

    def own(meta: Continuity | None) -> bool:
        return native is not None and meta is not None and meta.kind == native

    if not any(_rich(b) for b in turn.blocks):
        return turn
    blocks: list[Block] = []
    for block in turn.blocks:
        t = type(block)
        if (t is ServerToolCall or t is ServerToolResult) and own(block.meta):
            blocks.append(block)
        elif t is ServerToolCall:
            blocks.append(Text(call_text(block) + BREAK))
        elif t is ServerToolResult:
            blocks.append(Text(result_text(block) + BREAK))
        elif t is Text and block.citations and all(own(c.meta) for c in block.citations):
            blocks.append(block)
        elif t is Text and block.citations:
            blocks.append(
                replace(block, text=block.text + "\n\n" + citations_text(block.citations), citations=())
            )
        else:
            blocks.append(block)
    return replace(turn, blocks=blocks)


def _rich(block: Block) -> bool:
    t = type(block)
    return t is ServerToolCall or t is ServerToolResult or (t is Text and bool(block.citations))
