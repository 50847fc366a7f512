"""The plain Chat Completions messages (gateway/ingress/chat/plain.py) as msgspec Structs: a long
transcript's list read by msgspec into them at first sight checks in C what `plain` checks per
dict (gateway/ingress/typed_items.py), and `typed_message` decodes one as `plain_message` decodes
the same message parsed as a dict. tests/ingress/test_chat_typed.py compares both paths.

Each Struct accepts exactly what `plain` accepts: the same keys (unknown ones refused), the same
types (strings, `null` where `plain` takes None), ids not empty, a call's `type` "function" when
given; a message of any other shape fails the whole list, which is then parsed as before. The
Structs are out of the collector's sight (`gc=False`): they hold strings and lists of Structs,
never a cycle, and a long transcript's thousands of them would bring its collections sooner.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Annotated, Literal, Union

import msgspec
from orjson import JSONDecodeError, loads

from gateway.ingress.chat.plain import assistant_message, tool_call
from gateway.ingress.reasoning_details import plain_blocks
from gateway.ingress.typed_items import TypedItems
from gateway.transcript.model import REASONING_EFFORTS, Message, Role, Text, ToolCall, ToolResult
from gateway.transcript.seal import Sealer

_Id = Annotated[str, msgspec.Meta(min_length=1)]
_SYSTEM, _USER, _ASSISTANT, _TOOL = Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL


class Function(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    name: str
    arguments: str = ""


class Call(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    id: _Id
    function: Function
    type: Literal["function"] = "function"


class System(msgspec.Struct, tag_field="role", tag="system", forbid_unknown_fields=True, gc=False):
    content: str


class Developer(msgspec.Struct, tag_field="role", tag="developer", forbid_unknown_fields=True, gc=False):
    content: str


class User(msgspec.Struct, tag_field="role", tag="user", forbid_unknown_fields=True, gc=False):
    content: str


class Tool(msgspec.Struct, tag_field="role", tag="tool", forbid_unknown_fields=True, gc=False):
    tool_call_id: _Id
    content: str


class Assistant(msgspec.Struct, tag_field="role", tag="assistant", forbid_unknown_fields=True, gc=False):
    content: str | None = None
    tool_calls: list[Call] | None = None
    refusal: str | None = None
    reasoning_content: str | None = None


PlainMessage = Union[System, Developer, User, Tool, Assistant]
_INSTRUCTIONS = frozenset({System, Developer})

# an assistant's call's function nests deepest: the body 1, messages 2, the message 3, tool_calls
# 4, the call 5, its function 6
TYPED = TypedItems(
    msgspec.json.Decoder(list[PlainMessage]), 6, frozenset({System, Developer, User, Tool, Assistant})
)


def typed_messages(
    msgs: Sequence[PlainMessage], start: int, sealer: Sealer, out: list[tuple[Message, int]]
) -> tuple[bool, bool, bool, bool]:
    """Messages `start`, `start + 1`, ... read into their Structs, each decoded as `plain_message`
    decodes the same message parsed as a dict (its place `messages[index]` is named only in an
    error: formatted there, not for every message), appended to `out` as they go: one that raises
    leaves those before it there. One loop over a long transcript: a call a message (and the
    memo's per-item bookkeeping) cost about a fifth of its decode.

    Returns what the messages `decode_request` keeps of them hold that repair acts on
    (gateway/repair/holds.py), read from the Structs on the way instead of walking the blocks
    again: tool calls, tool results, reasoning, blank text or a message without blocks. None of
    these shapes makes a block of another kind the walk looks for (custom calls, continuity,
    media, server tools, cache marks). Instructions that open the conversation are not kept
    among the messages (their blank text does not count)."""
    append = out.append
    calls = results = reasoning = blank = False
    for index, msg in enumerate(msgs, start):
        kind = type(msg)
        if kind is Tool:
            results = True
            append((Message(_TOOL, (ToolResult(msg.tool_call_id, msg.content, False, (), None),)), 0))  # type: ignore[union-attr]
        elif kind is Assistant:
            listed = msg.tool_calls  # type: ignore[union-attr]
            if listed and len(listed) == 1:
                # an agent's turn (454 of a cold 1,000-message turn's messages), read here where
                # a call a message went to `_assistant`: one call (no duplicate id to look for),
                # `tool_call`'s checks inline (it raises its error), its blocks never empty
                # (`plain_end` finds nothing to refuse)
                call = listed[0]
                function = call.function
                arguments = function.arguments
                try:  # `arguments_ok` inline: its call and blank check were a third of 454 calls
                    loads(arguments)
                except JSONDecodeError:
                    if arguments.strip():
                        tool_call(call.id, function.name, arguments, None, set(), f"messages[{index}]", 0)
                block = ToolCall(call.id, function.name, arguments or "{}", None)
                text = msg.content or msg.refusal or ""  # type: ignore[union-attr]
                said = msg.reasoning_content  # type: ignore[union-attr]
                if said:
                    reasoning = True
                append((Message(_ASSISTANT, plain_blocks(text, (block,), said)), 0))
                calls = True
                if text and text.isspace():
                    blank = True
                continue
            text = msg.content or msg.refusal  # type: ignore[union-attr]
            if text and not listed:
                # a text answer (45 of a cold 1,000-message turn's): `_assistant`'s blocks, never
                # empty (nothing to refuse), without its four calls
                said = msg.reasoning_content  # type: ignore[union-attr]
                if said:
                    reasoning = True
                append((Message(_ASSISTANT, plain_blocks(text, (), said)), 0))
                if text.isspace():
                    blank = True
                continue
            append(_assistant(msg, index, sealer))  # type: ignore[arg-type]
            # the blocks `_assistant` made: reasoning, then text, then calls (`plain_blocks`)
            if msg.tool_calls:  # type: ignore[union-attr]
                calls = True
            if msg.reasoning_content:  # type: ignore[union-attr]
                reasoning = True
            if text:
                if text.isspace():
                    blank = True
            elif not msg.tool_calls and not msg.reasoning_content:  # type: ignore[union-attr]
                blank = True  # `content: ""`: an empty turn's blank text
        elif kind is User:
            content = msg.content  # type: ignore[union-attr]
            append((Message(_USER, (Text(content),)), 0))
            if not content or content.isspace():
                blank = True
        else:
            content = msg.content  # type: ignore[union-attr]
            append((Message(_SYSTEM, (Text(content),) if content else ()), 0))
            # among the messages only after the opening instructions, and only with text
            if content and content.isspace():
                before = islice(msgs, index - start)
                if not all(map(_INSTRUCTIONS.__contains__, map(type, before))):
                    blank = True
    return calls, results, reasoning, blank


def typed_message(msg: PlainMessage, index: int, sealer: Sealer) -> tuple[Message, int]:
    """Message `index` read into its Struct, decoded (`typed_messages` of that one)."""
    out: list[tuple[Message, int]] = []
    typed_messages((msg,), index, sealer, out)
    return out[0]


def _assistant(msg: Assistant, index: int, sealer: Sealer) -> tuple[Message, int]:
    """An assistant message of no call or several (`typed_messages` reads a one-call turn itself)."""
    calls = msg.tool_calls
    where = f"messages[{index}]"
    if not calls:
        return assistant_message(msg.content, msg.refusal, msg.reasoning_content, (), where, sealer)
    listed = [(call.id, call.function.name, call.function.arguments) for call in calls]
    return assistant_message(msg.content, msg.refusal, msg.reasoning_content, listed, where, sealer)


class NamedFunction(msgspec.Struct, gc=False):
    name: str


class NamedToolChoice(msgspec.Struct, gc=False):
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(msgspec.Struct, gc=False):
    include_usage: bool = False


_Positive = Annotated[int, msgspec.Meta(ge=1)]
_Unit = Annotated[float, msgspec.Meta(ge=0, le=1)]


class Head(msgspec.Struct, gc=False):
    """A request's top-level parameters as `wire.ChatRequestHead` reads them (the same names and
    values), for a request of the common shapes: checked in C from the parsed body, where pydantic
    built a model of them (~1.4 us, and more than that in a lone request's cold caches). It
    accepts less than the head does, never more: unknown fields pass (they are not read), a
    `response_format` other than null does not (its name's pattern is matched differently by
    Python's `re`), nor does anything pydantic would refuse; whatever it refuses goes to pydantic
    (`typed_head`). tests/ingress/test_chat_typed.py compares both on generated heads."""

    model: Annotated[str, msgspec.Meta(min_length=1)]
    stream: bool = False
    stream_options: StreamOptions | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    reasoning_effort: Literal[REASONING_EFFORTS] | None = None  # type: ignore[valid-type]
    max_tokens: _Positive | None = None
    max_completion_tokens: _Positive | None = None
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None
    top_p: _Unit | None = None
    stop: str | list[str] | None = None
    n: _Positive | None = None
    response_format: None = None


def typed_head(body: dict) -> Head | None:
    """`body`'s head read into `Head`, or None: validate it with pydantic (`wire.ChatRequestHead`),
    which accepts it or reports the request's first error."""
    try:
        return msgspec.convert(body, Head)
    except msgspec.ValidationError:
        return None
