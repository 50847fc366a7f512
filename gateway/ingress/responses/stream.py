"""Canonical answer events as the Responses event stream.

response.created, response.in_progress, then per item output_item.added / (content_part.added,
deltas, *.done, content_part.done) / output_item.done, and always one terminal event:
response.completed, response.incomplete, or response.failed with the error (after an `error`
event, as the API does: Codex ignores a bare `error` event and waits for the terminal one).
Every event has a `sequence_number`. Text items open at their first non-empty delta, so a text
block that only carries continuity shows no empty message.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.ingress.responses.output import (
    ERROR_FINISH,
    Answering,
    annotations,
    base_of,
    call_item,
    carrier_item,
    compaction_item,
    error_code,
    message_id,
    message_item,
    output_text,
    reasoning_item,
    reasoning_item_id,
    refusal_part,
    response_json,
    server_item,
    status_of,
)
from gateway.transcript.assembler import Assembler
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    Event,
    Finish,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.model import Reasoning, ServerToolCall, StopReason, Text, Usage
from gateway.transcript.seal import Sealer


class _Item:
    """One canonical block on its way out as an output item (-1: not opened yet)."""

    __slots__ = ("kind", "index", "id", "name", "call_id", "custom", "parts", "opened", "rendered")

    def __init__(self, kind: BlockKind, event: BlockStart) -> None:
        self.kind = kind
        self.index = -1
        self.id = event.id
        self.name = event.name
        self.call_id = event.id
        self.custom = event.custom
        self.parts: list[str] = []
        self.opened = False
        # its delta event around the sequence number and the text, once it has one (see _delta)
        self.rendered: tuple[bytes, bytes, bytes] | None = None


_MARK = "\x00delta\x00"
_OPENED_BY_CONTENT = frozenset((BlockKind.TEXT, BlockKind.REFUSAL, BlockKind.REASONING))


def delta_template(
    kind: str, head: dict[str, Any], tail: dict[str, Any]
) -> tuple[bytes, bytes, bytes] | None:
    """The bytes `_event(kind, {**head, "delta": text, **tail})` writes, in three pieces around
    the sequence number and the text's JSON string (rendered once with placeholders, so the
    pieces are that very rendering)."""
    data = orjson.dumps({"type": kind, "sequence_number": 0, **head, "delta": _MARK, **tail})
    before, sep, after = data.partition(b',"sequence_number":0,')
    middle, mark, end = after.partition(orjson.dumps(_MARK))
    if not sep or not mark:  # pragma: no cover - the placeholders are in the rendering above
        return None
    return (
        b"event: " + kind.encode() + b"\ndata: " + before + b',"sequence_number":',
        b"," + middle,
        end + b"\n\n",
    )


class ResponsesStreamEncoder:
    content_type = "text/event-stream"
    # a comment line after this many seconds without upstream bytes (a long thinking phase), so
    # clients and proxies do not time the stream out
    keepalive_seconds = 15.0

    def __init__(self, answering: Answering, reply_id: str, created: int, sealer: Sealer) -> None:
        self._answering = answering
        self._reply_id = reply_id
        self._base = base_of(reply_id)
        self._created = created
        self._sealer = sealer
        self._sequence = 0
        self._items: dict[int, _Item] = {}
        self._output: dict[int, dict[str, Any]] = {}  # output index -> its finished item
        self._next_index = 0
        self._assembler = Assembler()  # the turn, for the carrier and a compaction's summary
        self._usage: Usage | None = None
        self._stop: StopReason | None = None

    # -- framing ---------------------------------------------------------------------------------

    def _event(self, kind: str, fields: dict[str, Any]) -> bytes:
        payload = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    def _response(self, status: str, **kw: Any) -> dict[str, Any]:
        output = [self._output[i] for i in sorted(self._output)]
        usage = self._usage if status != "in_progress" else None
        return response_json(self._answering, self._reply_id, self._created, status, output, usage, **kw)

    def _open(self, item: dict[str, Any]) -> tuple[int, bytes]:
        index = self._next_index
        self._next_index += 1
        return index, self._event("response.output_item.added", {"output_index": index, "item": item})

    def _done(self, index: int, item: dict[str, Any]) -> bytes:
        self._output[index] = item
        return self._event("response.output_item.done", {"output_index": index, "item": item})

    # -- the protocol ----------------------------------------------------------------------------

    def start(self) -> bytes:
        shell = {"response": self._response("in_progress")}
        return self._event("response.created", shell) + self._event("response.in_progress", shell)

    def event(self, event: Event) -> bytes | None:
        self._assembler.add(event)
        t = type(event)
        if t is UsageUpdate:
            self._usage = event.usage
            return None
        if t is Finish:
            self._stop = event.stop_reason
            return None
        if self._answering.compaction:
            return None  # the answer is the summary, sent whole as one compaction item
        if t is BlockDelta:
            item = self._items.get(event.index)
            if item is None or not event.text:
                return None
            return self._delta(item, event.text)
        if t is BlockStart:
            item = self._items[event.index] = _Item(event.kind, event)
            return self._start(item)
        if t is BlockStop:
            item = self._items.pop(event.index, None)
            return self._stop_block(item, event) if item is not None else None
        return None

    def _start(self, item: _Item) -> bytes | None:
        if item.kind is BlockKind.TEXT or item.kind is BlockKind.REFUSAL:
            return None  # opened by its first text
        if item.kind is BlockKind.SERVER_TOOL_CALL or item.kind is BlockKind.SERVER_TOOL_RESULT:
            return None  # OpenAI's search item goes out whole when its call stops
        if item.kind is BlockKind.REASONING:
            item.index = self._next_index
            item.id = reasoning_item_id(item.id, self._base, item.index)
            _, out = self._open({"id": item.id, "type": "reasoning", "summary": [], "status": "in_progress"})
            return out
        custom = item.custom
        added = call_item(item.call_id, item.name, "", custom, self._answering.names, "in_progress")
        item.id = added["id"]
        item.index, out = self._open(added)
        return out

    def _delta(self, item: _Item, text: str) -> bytes | None:
        item.parts.append(text)
        if item.kind is BlockKind.SERVER_TOOL_CALL:
            return None
        rendered = item.rendered
        if rendered is not None:  # nearly every event: no dicts, one dump of the text
            before, middle, end = rendered
            sequence = self._sequence
            self._sequence = sequence + 1
            return b"".join((before, str(sequence).encode(), middle, orjson.dumps(text), end))
        out = self._opening(item)
        kind, head, tail = self._delta_shape(item)
        item.rendered = delta_template(kind, head, tail)
        return out + self._event(kind, {**head, "delta": text, **tail})

    def _opening(self, item: _Item) -> bytes:
        """The events that open an item at its first content (none for a call: opened at its start)."""
        if item.opened or item.kind not in _OPENED_BY_CONTENT:
            return b""
        item.opened = True
        if item.kind is BlockKind.TEXT or item.kind is BlockKind.REFUSAL:
            item.index = self._next_index
            item.id = message_id(self._base, item.index)
            ref = {"item_id": item.id, "output_index": item.index}
            _, out = self._open(message_item(item.id, "", "in_progress"))
            part = refusal_part("") if item.kind is BlockKind.REFUSAL else output_text("")
            return out + self._event("response.content_part.added", {**ref, "content_index": 0, "part": part})
        ref = {"item_id": item.id, "output_index": item.index}
        if self._answering.summaries:
            part = {"type": "summary_text", "text": ""}
            return self._event(
                "response.reasoning_summary_part.added", {**ref, "summary_index": 0, "part": part}
            )
        part = {"type": "reasoning_text", "text": ""}
        return self._event("response.content_part.added", {**ref, "content_index": 0, "part": part})

    def _delta_shape(self, item: _Item) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """An item's delta event: its type, the fields before the delta and those after it."""
        ref = {"item_id": item.id, "output_index": item.index}
        if item.kind is BlockKind.TEXT:
            return "response.output_text.delta", {**ref, "content_index": 0}, {"logprobs": []}
        if item.kind is BlockKind.REFUSAL:
            return "response.refusal.delta", {**ref, "content_index": 0}, {}
        if item.kind is BlockKind.REASONING:
            if self._answering.summaries:
                return "response.reasoning_summary_text.delta", {**ref, "summary_index": 0}, {}
            return "response.reasoning_text.delta", {**ref, "content_index": 0}, {}
        if item.custom:
            return "response.custom_tool_call_input.delta", ref, {}
        return "response.function_call_arguments.delta", ref, {}

    def _stop_block(self, item: _Item, event: BlockStop) -> bytes | None:
        text = "".join(item.parts)
        if item.kind is BlockKind.SERVER_TOOL_CALL:
            found = server_item(ServerToolCall(item.id, item.name, text, event.meta))
            index, out = self._open({**found, "status": "in_progress"})
            return out + self._done(index, found)
        if item.kind is BlockKind.SERVER_TOOL_RESULT:
            return None  # carried by its call's item
        ref = {"item_id": item.id, "output_index": item.index}
        if item.kind is BlockKind.TEXT or item.kind is BlockKind.REFUSAL:
            if not item.opened:
                return None  # no text: its continuity, if any, goes in the carrier
            if item.kind is BlockKind.REFUSAL:
                part = refusal_part(text)
                done = self._event("response.refusal.done", {**ref, "content_index": 0, "refusal": text})
            else:
                notes = annotations(event.citations)
                part = output_text(text, notes)
                done = self._event(
                    "response.output_text.done", {**ref, "content_index": 0, "text": text, "logprobs": []}
                )
            refusal = item.kind is BlockKind.REFUSAL
            return (
                done
                + self._event("response.content_part.done", {**ref, "content_index": 0, "part": part})
                + self._done(
                    item.index, message_item(item.id, text, refusal=refusal, notes=part.get("annotations"))
                )
            )
        if item.kind is BlockKind.REASONING:
            out = b""
            if item.opened and self._answering.summaries:
                part = {"type": "summary_text", "text": text}
                out = self._event(
                    "response.reasoning_summary_text.done", {**ref, "summary_index": 0, "text": text}
                ) + self._event(
                    "response.reasoning_summary_part.done", {**ref, "summary_index": 0, "part": part}
                )
            elif item.opened:
                part = {"type": "reasoning_text", "text": text}
                out = self._event(
                    "response.reasoning_text.done", {**ref, "content_index": 0, "text": text}
                ) + self._event("response.content_part.done", {**ref, "content_index": 0, "part": part})
            block = Reasoning(text, event.meta)
            return out + self._done(item.index, reasoning_item(block, item.id, self._answering, self._sealer))
        if item.custom:
            done = self._event("response.custom_tool_call_input.done", {**ref, "input": text})
        else:
            text = text.strip() or "{}"
            done = self._event("response.function_call_arguments.done", {**ref, "arguments": text})
        final = call_item(item.call_id, item.name, text, item.custom, self._answering.names, "completed")
        return done + self._done(item.index, final)

    def finish(self) -> bytes:
        turn = self._assembler.finish()
        if self._answering.compaction:
            summary = "".join(b.text for b in turn.blocks if type(b) is Text)
            compaction = compaction_item(self._base, summary, self._sealer)
            index, out = self._open(compaction)
            out += self._done(index, compaction)
        else:
            out = b""
            carrier = carrier_item(turn.blocks, self._base, self._answering, self._sealer)
            if carrier is not None:
                index, out = self._open(carrier)
                out += self._done(index, carrier)
        status, incomplete = status_of(self._stop or StopReason.END_TURN)
        if status == "failed":
            return out + self._failed(ERROR_FINISH)
        kind = "response.completed" if status == "completed" else "response.incomplete"
        return out + self._event(kind, {"response": self._response(status, incomplete=incomplete)})

    def _failed(self, error: UpstreamError) -> bytes:
        code = error_code(error)
        body = {"code": code, "message": error.message, "param": None}
        return self._event("error", {**body, "error": {"type": code, **body}}) + self._event(
            "response.failed", {"response": self._response("failed", error=error)}
        )

    def error(self, error: UpstreamError) -> bytes:
        return self._failed(error)

    def keepalive(self) -> bytes:
        return b": keepalive\n\n"
