"""Responses `input` items as canonical messages.

Items group into messages the way the Responses API reads them: consecutive assistant-side items
(assistant messages, reasoning, function and custom tool calls) are one assistant turn,
consecutive tool outputs one tool message; system/developer messages before the first other item
are the opening instructions, later ones stay in place (Role.SYSTEM). An `item_reference` to an
item this request does not hold names an output item of an earlier kept answer: it is an
assistant-side item whose blocks the exchange puts in its place (`ItemRef`).

The reading is a left-to-right fold over the items (what an item makes depends on the open turn,
the ids seen, the tools added so far): an agent's next turn re-sends the same items in front, and
the decode memo hands back the same witnesses for them, so the fold resumes from its state after
them and reads only the new items, at their own places (gateway/ingress/resumed.py).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.ingress.base import ItemRef
from gateway.ingress.errors import invalid
from gateway.ingress.memo_items import Items as Found
from gateway.ingress.responses.fields import array, obj, optional_text, path_of, text
from gateway.ingress.responses.tokens import (
    CARRIER_KIND,
    GATEWAY,
    apply_carrier,
    compaction_summary,
    echoed_native,
    sealed,
)
from gateway.ingress.responses.tools import Tools
from gateway.ingress.resumed import ResumedReads
from gateway.transcript.model import (
    ANY_ISSUER,
    Block,
    Continuity,
    Document,
    Image,
    Message,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolResult,
)
from gateway.transcript.seal import Sealer
from gateway.wire.openai_server import KIND as OPENAI_RESPONSES
from gateway.wire.openai_server import SERVER_ITEMS, annotation, server_item

# how the summary of a compacted conversation is put before the rest of it
COMPACTION_PREFIX = "Summary of the conversation so far (earlier turns were compacted):\n\n"
SUMMARY_SEPARATOR = "\n\n"

_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})
# items of OpenAI-hosted tools and other server-side state the canonical transcript does not hold
# (web and file search calls it does: openai_server)
_REFUSED = {
    "computer_call": "a computer-use call",
    "computer_call_output": "a computer-use call output",
    "code_interpreter_call": "a hosted code interpreter call",
    "image_generation_call": "a hosted image generation call",
    "local_shell_call": "a local shell call",
    "local_shell_call_output": "a local shell call output",
    "mcp_call": "a hosted MCP call",
    "mcp_list_tools": "a hosted MCP tool list",
    "mcp_approval_request": "a hosted MCP approval request",
    "mcp_approval_response": "a hosted MCP approval response",
    "tool_search_call": "a hosted tool search call",
    "tool_search_output": "a hosted tool search output",
}


def _echoed(data: Any) -> Continuity:
    """Server-tool items and annotations a client echoes: OpenAI issued them, to a scope the
    gateway cannot tell, so they replay to OpenAI Responses targets."""
    return Continuity("client", ANY_ISSUER, OPENAI_RESPONSES, ANY_ISSUER, dict(data))


@dataclass(slots=True)
class Items:
    """What the input items said, beyond the transcript."""

    system: list[Text] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    compaction_trigger: bool = False
    ignored_tokens: int = 0
    references: list[ItemRef] = field(default_factory=list)


class _Reader:
    def __init__(self, sealer: Sealer, tools: Tools, value: Callable[[int], Any]) -> None:
        self.sealer = sealer
        self.tools = tools
        self.value = value  # the item at an index of the list, parsed (`Reading.value`)
        self.out = Items()
        self.assistant: list[Block] | None = None
        self.referenced = False  # the open assistant turn names items of a kept answer
        self.results: list[ToolResult] | None = None
        # item id -> (its index, path): held with the reading's state without the item itself
        self.seen: dict[str, tuple[int, str]] = {}
        # the open turn's message as `settle` made it: the same object on every later turn until
        # the turn goes on (the repair passes resume past the messages they saw: identity)
        self.made: Message | None = None

    def state(self, members: list[Any], hosted: list[Any]) -> tuple[Any, ...]:
        """What `resume` goes on from (never changed once held): the reading so far, before the
        open turn is flushed, and what the items added to the tools (`members`, `hosted`)."""
        out = self.out
        return (
            tuple(out.system),
            tuple(out.messages),
            out.compaction_trigger,
            out.ignored_tokens,
            tuple(out.references),
            None if self.assistant is None else tuple(self.assistant),
            self.referenced,
            None if self.results is None else tuple(self.results),
            tuple(self.seen.items()),  # a tuple of tuples leaves the collector's sight, a dict of them not
            tuple(members),
            tuple(hosted),
            self.made,
        )

    def resume(self, held: tuple[Any, ...]) -> None:
        """Go on from `state`'s `held` (copied: a held state is never changed)."""
        out = self.out
        out.system, out.messages = [*held[0]], [*held[1]]
        out.compaction_trigger, out.ignored_tokens, out.references = held[2], held[3], [*held[4]]
        self.assistant = None if held[5] is None else [*held[5]]
        self.referenced = held[6]
        self.results = None if held[7] is None else [*held[7]]
        self.seen = dict(held[8])
        self.tools._members.extend(held[9])
        self.tools.hosted.extend(held[10])
        self.made = held[11]

    def settle(self) -> None:
        """The open turn's message made now (`made`), as `_flush` would make it."""
        if self.made is not None:
            return
        if self.assistant is not None and (self.assistant or self.referenced):
            self.made = Message(Role.ASSISTANT, tuple(self.assistant))
        elif self.results is not None:
            self.made = Message(Role.TOOL, tuple(self.results))

    # -- grouping ----------------------------------------------------------------------------

    def _flush(self) -> None:
        made, self.made = self.made, None
        if self.assistant is not None:
            if self.assistant or self.referenced:  # the referenced blocks fill it later
                self.out.messages.append(
                    made if made is not None else Message(Role.ASSISTANT, tuple(self.assistant))
                )
            self.assistant = None
            self.referenced = False
        if self.results is not None:
            self.out.messages.append(made if made is not None else Message(Role.TOOL, tuple(self.results)))
            self.results = None

    def _assistant_blocks(self) -> list[Block]:
        """The open assistant turn's blocks, to add to (its message is made again)."""
        if self.results is not None:
            self._flush()
        if self.assistant is None:
            self.assistant = []
        self.made = None
        return self.assistant

    def _message(self, role: Role, blocks: tuple[Block, ...]) -> None:
        self._flush()
        self.out.messages.append(Message(role, blocks))

    # -- items -------------------------------------------------------------------------------

    def item(self, raw: Any, index: int) -> None:
        path = path_of("input", index)
        item = obj(raw, path)
        kind = item.get("type")
        if kind is None and "role" in item:
            kind = "message"  # the short form: {"role", "content"}
        if not isinstance(kind, str):
            raise invalid("is required", param=path_of(path, "type"), code="missing_required_parameter")
        item_id = item.get("id")
        if isinstance(item_id, str) and kind != "item_reference":
            self.seen[item_id] = (index, path)
        if kind == "message":
            self._message_item(item, path)
        elif kind == "reasoning":
            self._reasoning(item, path)
        elif kind == "function_call":
            self._call(item, path, custom=False)
        elif kind == "custom_tool_call":
            self._call(item, path, custom=True)
        elif kind in _OUTPUT_ITEMS:
            self._output(item, path)
        elif kind in SERVER_ITEMS:
            call, result = server_item(item, _echoed, f"{kind}_{path}")
            self._assistant_blocks().extend((call, result))
        elif kind == "item_reference":
            self._reference(item, path)
        elif kind == "compaction" or kind == "compaction_summary":
            self._compaction(item, path)
        elif kind == "compaction_trigger":
            self.out.compaction_trigger = True
        elif kind == "additional_tools":
            for n, tool in enumerate(array(item.get("tools") or [], path_of(path, "tools"))):
                self.tools.add(tool, path_of(path_of(path, "tools"), n))
        elif kind in _REFUSED:
            raise invalid(
                f"{_REFUSED[kind]} ({kind!r}) cannot be replayed through this gateway",
                param=path_of(path, "type"),
                code="unsupported_item",
            )
        else:
            raise invalid(
                f"unknown input item type {kind!r}", param=path_of(path, "type"), code="invalid_value"
            )

    def _message_item(self, item: dict[str, Any], path: str) -> None:
        role = text(item, "role", path)
        content = item.get("content")
        where = path_of(path, "content")
        if role == "assistant":
            self._assistant_blocks().extend(_assistant_parts(content, where))
        elif role == "user":
            self._message(Role.USER, _user_parts(content, where))
        elif role in ("system", "developer"):
            texts = [t for t in _instruction_parts(content, where) if t.text]
            opening = not self.out.messages and self.assistant is None and self.results is None
            if opening:
                self.out.system.extend(texts)
            elif texts:
                self._message(Role.SYSTEM, tuple(texts))
        else:
            raise invalid(
                f"role must be user, assistant, system or developer, got {role!r}",
                param=path_of(path, "role"),
                code="invalid_value",
            )

    def _reasoning(self, item: dict[str, Any], path: str) -> None:
        summary = [
            text(
                obj(part, path_of(path_of(path, "summary"), n)), "text", path_of(path_of(path, "summary"), n)
            )
            for n, part in enumerate(array(item.get("summary") or [], path_of(path, "summary")))
        ]
        content = [
            text(
                obj(part, path_of(path_of(path, "content"), n)), "text", path_of(path_of(path, "content"), n)
            )
            for n, part in enumerate(array(item.get("content") or [], path_of(path, "content")))
        ]
        token = optional_text(item, "encrypted_content", path)
        blocks = self._assistant_blocks()
        readable = "".join(content) if content else SUMMARY_SEPARATOR.join(summary)
        if not token:
            if readable:
                blocks.append(Reasoning(readable))
            return
        if not sealed(token):  # OpenAI's own token, exactly as it was issued
            item_id = text(item, "id", path)
            blocks.append(Reasoning(SUMMARY_SEPARATOR.join(summary), echoed_native(item_id, token, summary)))
            return
        meta = self.sealer.unseal(token)
        if meta is None or (meta.provider == GATEWAY and meta.kind != CARRIER_KIND):
            self.out.ignored_tokens += 1  # forged, from another deployment, or not reasoning
            if readable:
                blocks.append(Reasoning(readable))
            return
        if meta.kind == CARRIER_KIND:
            # the carrier ends its turn: its entries refer to the blocks of that turn alone
            self.assistant = apply_carrier(blocks, meta.data)
            self._flush()
            return
        blocks.append(Reasoning(readable, meta))

    def _call(self, item: dict[str, Any], path: str, custom: bool) -> None:
        call_id = text(item, "call_id", path, empty=False)
        name = self.tools.names.canonical(optional_text(item, "namespace", path), text(item, "name", path))
        if custom:
            arguments = text(item, "input", path, required=False)
        else:
            arguments = text(item, "arguments", path, required=False)
            if arguments.strip():
                try:
                    orjson.loads(arguments)
                except orjson.JSONDecodeError:
                    raise invalid(
                        "must be a JSON string", param=path_of(path, "arguments"), code="invalid_value"
                    ) from None
            else:
                arguments = "{}"
        self._assistant_blocks().append(ToolCall(call_id, name, arguments, custom=custom))

    def _output(self, item: dict[str, Any], path: str) -> None:
        call_id = text(item, "call_id", path, empty=False)
        where = path_of(path, "output")
        output = item.get("output")
        if isinstance(output, str):
            result = ToolResult(call_id, output)
        elif isinstance(output, list):
            texts: list[str] = []
            images: list[Image] = []
            documents: list[Document] = []
            for n, part in enumerate(output):
                block = _input_part(part, path_of(where, n))
                if type(block) is Text:
                    texts.append(block.text)
                elif type(block) is Image:
                    images.append(block)
                else:
                    documents.append(block)  # type: ignore[arg-type]  # _input_part: text, image or file
            result = ToolResult(call_id, "".join(texts), False, tuple(images), documents=tuple(documents))
        else:
            raise invalid("must be a string or an array of content parts", param=where, code="invalid_type")
        if self.assistant is not None:
            self._flush()
        if self.results is None:
            self.results = []
        self.made = None
        self.results.append(result)

    def _reference(self, item: dict[str, Any], path: str) -> None:
        item_id = text(item, "id", path)
        found = self.seen.get(item_id)
        if found is not None:  # the item itself came earlier in this request
            self.item(self.value(found[0]), found[0])
            return
        blocks = self._assistant_blocks()
        # the open turn becomes the next message: nothing else is appended while it is open
        self.out.references.append(ItemRef(item_id, path_of(path, "id"), len(self.out.messages), len(blocks)))
        self.referenced = True

    def _compaction(self, item: dict[str, Any], path: str) -> None:
        summary = compaction_summary(item.get("encrypted_content"), self.sealer)
        if summary is None:
            # another deployment's or OpenAI's own compaction: nothing here can read it
            self.out.ignored_tokens += 1
            return
        self._message(Role.USER, (Text(COMPACTION_PREFIX + summary),))


def read_items(
    raw: Any, sealer: Sealer, tools: Tools, found: Found[Any] | None = None, body: Any = None
) -> Items:
    """`found`: what the decode memo found of the `input` list of `body` (within an exchange)."""
    if isinstance(raw, str):  # one user message: no item to name
        out = Items()
        out.messages.append(Message(Role.USER, (Text(raw),)))
        return out
    reading = _READ.begin(array(raw, "input"), found, body, "input", sealer)
    reader = _Reader(sealer, tools, reading.value)
    members, hosted = len(tools._members), len(tools.hosted)
    if reading.state is not None:
        reader.resume(reading.state)
    listed, record = reading.values, reading.record
    for n in range(reading.start, len(listed)):
        record(n)
        reader.item(listed[n], n)
    reader.settle()
    _READ.end(reading, sealer, lambda: reader.state(tools._members[members:], tools.hosted[hosted:]))
    reader._flush()
    return reader.out


# the reader's state after a conversation's items, per conversation (resumed: see above)
_READ = ResumedReads()


# -- content parts ---------------------------------------------------------------------------------


def _parts(content: Any, path: str) -> list[tuple[dict[str, Any], str]]:
    if isinstance(content, str):
        return [({"type": "input_text", "text": content}, path)]
    return [(obj(part, path_of(path, n)), path_of(path, n)) for n, part in enumerate(array(content, path))]


def _assistant_parts(content: Any, path: str) -> list[Block]:
    blocks: list[Block] = []
    for part, where in _parts(content, path):
        kind = part.get("type")
        if kind in ("output_text", "input_text", "text"):
            body = text(part, "text", where)
            notes = array(part.get("annotations") or [], path_of(where, "annotations"))
            citations = tuple(
                annotation(obj(a, path_of(path_of(where, "annotations"), n)), body, _echoed)
                for n, a in enumerate(notes)
            )
            blocks.append(Text(body, citations=citations))
        elif kind == "refusal":
            blocks.append(Text(text(part, "refusal", where)))
        else:
            raise invalid(
                f"an assistant message holds output_text and refusal parts, got {kind!r}",
                param=path_of(where, "type"),
                code="invalid_value",
            )
    return blocks


def _instruction_parts(content: Any, path: str) -> list[Text]:
    out = []
    for part, where in _parts(content, path):
        if part.get("type") not in ("input_text", "text"):
            raise invalid(
                "system and developer messages hold text only",
                param=path_of(where, "type"),
                code="invalid_value",
            )
        out.append(Text(text(part, "text", where)))
    return out


def _user_parts(content: Any, path: str) -> tuple[Block, ...]:
    return tuple(_input_part(part, where) for part, where in _parts(content, path))


def _input_part(raw: Any, path: str) -> Block:
    part = obj(raw, path)
    kind = part.get("type")
    if kind in ("input_text", "text"):
        return Text(text(part, "text", path))
    if kind == "input_image":
        url = optional_text(part, "image_url", path)
        if not url:
            raise _file_id(path, "image_url")
        detail = optional_text(part, "detail", path)
        return Image(url, None if detail == "auto" else detail)
    if kind == "input_file":
        return _document(part, path)
    raise invalid(
        f"content part type {kind!r} is not supported", param=path_of(path, "type"), code="invalid_value"
    )


def _file_id(path: str, wanted: str) -> Exception:
    return invalid(
        f"files uploaded to OpenAI (file_id) cannot reach other providers: send {wanted}",
        param=path_of(path, "file_id"),
        code="unsupported_content",
    )


def _document(part: dict[str, Any], path: str) -> Document:
    title = optional_text(part, "filename", path)
    url = optional_text(part, "file_url", path)
    if url:
        return Document(url, _media_type(title), title)
    data = optional_text(part, "file_data", path)
    if not data:
        raise _file_id(path, "file_data or file_url")
    if data.startswith("data:"):
        media_type = data[5:].split(";", 1)[0] or _media_type(title)
        return Document(data, media_type, title)
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(
            "must be base64 or a data: URL", param=path_of(path, "file_data"), code="invalid_value"
        ) from None
    media_type = _media_type(title)
    return Document(f"data:{media_type};base64,{data}", media_type, title)


def _media_type(filename: str | None) -> str:
    if filename and filename.lower().endswith((".txt", ".md")):
        return "text/plain"
    return "application/pdf"
