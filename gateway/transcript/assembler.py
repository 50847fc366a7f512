"""Fold canonical stream events into one assistant turn.

Blocks keep the order in which they STARTED, not the order in which they finished: providers
interleave reasoning, text and tool calls and finish them out of order (seed 000, section 3.4).
"""

from __future__ import annotations

from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    Event,
    Finish,
    MessageStart,
    StreamError,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.model import (
    AssistantTurn,
    Block,
    Citation,
    Continuity,
    Reasoning,
    ServerToolCall,
    ServerToolResult,
    StopReason,
    Text,
    ToolCall,
    Usage,
)


class AssemblyError(ValueError):
    """The event sequence broke the start/delta/stop protocol (a decoder bug or a broken
    upstream); the caller turns it into a protocol error."""


# deltas kept apart before they are joined into one string: a delta is a few characters (12 in
# a typical stream) and a separate str costs ~50 bytes of header, so an answer held as its deltas
# took ~5x its size (a long answer, or one relayed to a client that stopped reading)
_JOIN_EVERY = 256


class _Open:
    __slots__ = ("kind", "id", "name", "custom", "parts", "joined", "meta", "closed", "citations", "result")

    def __init__(
        self, kind: BlockKind, id: str, name: str, custom: bool, result: ServerToolResult | None
    ) -> None:
        self.kind = kind
        self.id = id
        self.name = name
        self.custom = custom
        self.parts: list[str] = []  # the latest deltas
        self.joined: list[str] = []  # the earlier ones, _JOIN_EVERY at a time
        self.meta: Continuity | None = None
        self.closed = False
        self.citations: tuple[Citation, ...] = ()
        self.result = result


class Assembler:
    """Per-answer state machine. Feed every event with `add`; `finish` returns the turn."""

    def __init__(self) -> None:
        self._blocks: dict[int, _Open] = {}  # dicts keep insertion (= start) order
        self.usage = Usage()
        self.stop_reason: StopReason | None = None
        self.response_id = ""
        self.model = ""
        self.error: UpstreamError | None = None

    def add(self, event: Event) -> None:
        t = type(event)
        if t is BlockDelta:
            block = self._blocks.get(event.index)
            if block is None or block.closed:
                raise AssemblyError(f"delta for block {event.index} that is not open")
            parts = block.parts
            parts.append(event.text)
            if len(parts) == _JOIN_EVERY:
                block.joined.append("".join(parts))
                parts.clear()
        elif t is BlockStart:
            if event.index in self._blocks:
                raise AssemblyError(f"block {event.index} started twice")
            if event.kind is BlockKind.SERVER_TOOL_RESULT and event.result is None:
                raise AssemblyError(f"server tool result {event.index} started without its block")
            self._blocks[event.index] = _Open(event.kind, event.id, event.name, event.custom, event.result)
        elif t is BlockStop:
            block = self._blocks.get(event.index)
            if block is None or block.closed:
                raise AssemblyError(f"stop for block {event.index} that is not open")
            block.closed = True
            if event.meta is not None:
                block.meta = event.meta
            if event.citations:
                block.citations = event.citations
        elif t is UsageUpdate:
            self.usage = event.usage
        elif t is Finish:
            self.stop_reason = event.stop_reason
        elif t is MessageStart:
            self.response_id = event.response_id or self.response_id
            self.model = event.model or self.model
        elif t is StreamError:
            self.error = event.error
        else:  # pragma: no cover - Event is a closed union
            raise AssemblyError(f"unknown event {event!r}")

    def finish(self) -> AssistantTurn:
        """The assembled turn. Blocks still open are closed as they are (a truncated stream
        has already produced a StreamError the caller acts on)."""
        blocks: list[Block] = []
        for block in self._blocks.values():
            text = "".join([*block.joined, *block.parts] if block.joined else block.parts)
            if block.kind is BlockKind.TEXT:
                blocks.append(Text(text, block.meta, citations=block.citations))
            elif block.kind is BlockKind.REASONING:
                blocks.append(Reasoning(text, block.meta))
            elif block.kind is BlockKind.TOOL_CALL:
                if block.custom:  # free text input, kept exactly
                    blocks.append(ToolCall(block.id, block.name, text, block.meta, custom=True))
                else:
                    blocks.append(ToolCall(block.id, block.name, text.strip() or "{}", block.meta))
            elif block.kind is BlockKind.REFUSAL:
                blocks.append(Text(text, block.meta, refusal=True))
            elif block.kind is BlockKind.SERVER_TOOL_CALL:
                blocks.append(ServerToolCall(block.id, block.name, text.strip() or "{}", block.meta))
            elif block.kind is BlockKind.SERVER_TOOL_RESULT:
                blocks.append(block.result)  # type: ignore[arg-type]  # checked at its start
            else:  # pragma: no cover - BlockKind is closed
                raise AssemblyError(f"unknown block kind {block.kind}")
        stop = self.stop_reason
        if stop is None:
            stop = StopReason.ERROR if self.error else StopReason.END_TURN
        return AssistantTurn(blocks, stop, self.usage, self.response_id, self.model)


def fold(events: list[Event]) -> AssistantTurn:
    assembler = Assembler()
    for event in events:
        assembler.add(event)
    return assembler.finish()


def unfold(turn: AssistantTurn) -> list[Event]:
    """The events a stream of `turn` would have carried (the inverse of `fold`): a dialect renders
    a whole answer with the same code that renders a stream."""
    events: list[Event] = [MessageStart(turn.response_id, turn.model)]
    for index, block in enumerate(turn.blocks):
        t = type(block)
        citations: tuple[Citation, ...] = ()
        if t is Text:
            events.append(BlockStart(index, BlockKind.TEXT))
            text = block.text
            citations = block.citations
        elif t is Reasoning:
            events.append(BlockStart(index, BlockKind.REASONING))
            text = block.text
        elif t is ToolCall:
            events.append(BlockStart(index, BlockKind.TOOL_CALL, block.id, block.name))
            text = block.arguments
        elif t is ServerToolCall:
            events.append(BlockStart(index, BlockKind.SERVER_TOOL_CALL, block.id, block.name))
            text = block.input
        elif t is ServerToolResult:
            events.append(
                BlockStart(index, BlockKind.SERVER_TOOL_RESULT, block.call_id, block.name, result=block)
            )
            events.append(BlockStop(index))
            continue
        else:  # pragma: no cover - an assistant turn holds only these kinds
            raise AssemblyError(f"unexpected block in an assistant turn: {block!r}")
        if text:
            events.append(BlockDelta(index, text))
        events.append(BlockStop(index, block.meta, citations))
    events.append(UsageUpdate(turn.usage))
    events.append(Finish(turn.stop_reason))
    return events
