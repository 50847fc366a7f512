"""Every ingress codec round-trips the canonical transcript: a conversation written in a dialect
the way its clients write it - assistant turns exactly as the gateway answered them (with their
continuity in the dialect's own fields), the client's own messages as the dialect spells them -
decodes to the same canonical transcript. So a conversation can move between dialects and
between stateless clients without losing a token.

Equality is up to what a dialect's wire cannot express, made explicit in `normal`: Chat
Completions has one tool message per result; Responses groups consecutive tool outputs, and hands
OpenAI's own reasoning to the client as OpenAI issued it, so the echo names no issuer scope (the
continuity store restores the exact issuer; tests/ingress/test_responses_tokens.py).
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.ingress.base import Inbound, Reply
from gateway.ingress.chat import codec as chat
from gateway.ingress.chat.encode import completion_json
from gateway.ingress.echo_formats import anthropic_thinking, anthropic_token
from gateway.ingress.messages import codec as messages
from gateway.ingress.responses import codec as responses
from gateway.ingress.responses.output import Answering, output_items
from gateway.ingress.responses.tokens import echoed_native
from gateway.ingress.responses.tools import ToolNames
from gateway.transcript.model import (
    NATIVE_ID,
    AssistantTurn,
    Block,
    Continuity,
    Document,
    Image,
    Message,
    Reasoning,
    Request,
    Role,
    StopReason,
    Text,
    ToolCall,
    ToolResult,
    Usage,
)
from gateway.transcript.seal import Sealer

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEALER = Sealer(b"k" * 32)
PNG = "data:image/png;base64,iVBORw0KGgo="
PDF = "data:application/pdf;base64,JVBERi0xLjQK"

words = st.text(alphabet="abc xyz\n✓", min_size=1, max_size=12)
tokens = st.text(alphabet="ABCxyz0123+/=", min_size=1, max_size=16)
foreign_kinds = st.sampled_from(["anthropic", "gemini", "deepseek", "kimi", "mistral", "openai_chat"])
metas = st.builds(
    Continuity,
    provider=st.sampled_from(["claude", "gem", "ds"]),
    scope=st.sampled_from(["claude", "acme"]),
    kind=foreign_kinds | st.just("openai_responses"),
    model=st.sampled_from(["m-1", "m-2"]),
    data=st.dictionaries(
        st.sampled_from(["signature", "thought_signature", NATIVE_ID, "item_id"]), tokens, max_size=2
    ),
)

# The strategies the composites draw from, built once: a strategy built inside a draw is built and
# validated again at every draw; the same strategies, the same draws.
_two_words_at_most = st.lists(words, max_size=2)
_item_numbers = st.integers(0, 10**6)
_foreign_metas = st.none() | metas.filter(lambda m: m.kind != "openai_responses")
_texts_after_meta = st.just("") | words
_metas_or_none = st.none() | metas
_blocks = st.lists(st.sampled_from(["reasoning", "text", "empty", "call"]), min_size=1, max_size=6)
_call_names = st.sampled_from(["search", "apply_patch"])
_steps = st.lists(st.sampled_from(["user", "assistant", "system"]), min_size=1, max_size=8)
_details = st.sampled_from([None, "low", "high"])
_filenames = st.none() | st.just("a.pdf")


@st.composite
def reasoning(draw: st.DrawFn) -> Reasoning:
    if draw(st.booleans()):  # OpenAI Responses' own reasoning item
        summary = draw(_two_words_at_most)
        data = {
            "id": f"rs_{draw(_item_numbers)}",
            "encrypted_content": draw(tokens),
            "summary": summary,
        }
        return Reasoning(
            "\n\n".join(summary), Continuity("openai", "openai", "openai_responses", "gpt-5", data)
        )
    meta = draw(_foreign_metas)
    text = draw(words if meta is None else _texts_after_meta)
    return Reasoning(text, meta)


_reasoning = reasoning()


class Ids:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"call_{self.n:024d}"


@st.composite
def assistant(draw: st.DrawFn, ids: Ids, rich: bool) -> tuple[Message, list[ToolCall]]:
    """An assistant turn as a provider answers: reasoning, text and calls in any order (`rich`);
    a Chat Completions message has one text, before its calls, and no custom calls."""
    blocks: list[Block] = []
    texts = 0
    for what in draw(_blocks):
        if what == "reasoning":
            blocks.append(draw(_reasoning))
        elif what == "text" and (rich or (texts == 0 and not any(type(b) is ToolCall for b in blocks))):
            blocks.append(Text(draw(words), draw(_metas_or_none)))
            texts += 1
        elif what == "empty" and (rich or texts == 1):
            # e.g. Gemini's signature part after the text (Chat Completions joins a message's
            # texts into one: it knows such a part only after the text)
            blocks.append(Text("", draw(metas)))
        elif what == "call":
            custom = rich and draw(st.booleans())
            arguments = draw(words) if custom else orjson.dumps({"q": draw(words)}).decode()
            blocks.append(
                ToolCall(
                    ids(),
                    draw(_call_names),
                    arguments,
                    draw(_metas_or_none),
                    custom,
                )
            )
    if not any(type(b) is not Text or b.text for b in blocks):
        blocks.insert(0, Text("Done."))
    message = Message(Role.ASSISTANT, tuple(blocks))
    return message, [b for b in blocks if type(b) is ToolCall]


@st.composite
def transcripts(draw: st.DrawFn, rich: bool) -> Request:
    ids = Ids()
    system = tuple(Text(t) for t in draw(_two_words_at_most))
    messages: list[Message] = []
    for step in draw(_steps):
        if step == "user" or not messages:
            parts: list[Block] = [Text(draw(words))]
            if draw(st.booleans()):
                parts.append(Image(PNG, draw(_details)))
            if rich and draw(st.booleans()):
                parts.append(Document(PDF, "application/pdf", draw(_filenames)))
            messages.append(Message(Role.USER, tuple(parts)))
        elif step == "system":
            messages.append(Message(Role.SYSTEM, (Text(draw(words)),)))
        elif messages[-1].role is not Role.ASSISTANT:
            message, calls = draw(assistant(ids, rich))
            messages.append(message)
            if calls:  # a client answers every call before it speaks again
                results = tuple(
                    ToolResult(c.id, draw(words), False, (Image(PNG),) if draw(st.booleans()) else ())
                    for c in calls
                )
                split = draw(st.booleans())
                messages.extend(
                    [Message(Role.TOOL, (r,)) for r in results] if split else [Message(Role.TOOL, results)]
                )
    return Request(model="m", messages=tuple(messages), system=system)


# -- each dialect, written as its clients write it --------------------------------------------------


def _turn(message: Message) -> AssistantTurn:
    return AssistantTurn(list(message.blocks), StopReason.END_TURN, Usage())


def chat_body(request: Request) -> dict:
    out: list[dict] = [{"role": "system", "content": t.text} for t in request.system]
    for message in request.messages:
        if message.role is Role.ASSISTANT:
            answer = orjson.loads(completion_json(_turn(message), "chatcmpl-x", "m", SEALER, 0))
            out.append(answer["choices"][0]["message"])  # sent back as the client got it
        elif message.role is Role.TOOL:
            for r in message.blocks:
                parts = [{"type": "text", "text": r.content}] + [
                    {"type": "image_url", "image_url": {"url": i.url}} for i in r.images
                ]
                out.append(
                    {"role": "tool", "tool_call_id": r.call_id, "content": parts if r.images else r.content}
                )
        elif message.role is Role.SYSTEM:
            out.append({"role": "system", "content": message.text()})
        else:
            out.append({"role": "user", "content": [_chat_part(b) for b in message.blocks]})
    return {"model": request.model, "messages": out}


def _chat_part(block: Block) -> dict:
    if type(block) is Text:
        return {"type": "text", "text": block.text}
    image_url = {"url": block.url} | ({"detail": block.detail} if block.detail else {})
    return {"type": "image_url", "image_url": image_url}


def responses_body(request: Request, summaries: bool) -> dict:
    answering = Answering({}, ToolNames(), summaries=summaries, encrypted=True)
    custom = {b.id for m in request.messages for b in m.blocks if type(b) is ToolCall and b.custom}
    items: list[dict] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": t.text}]}
        for t in request.system
    ]
    for n, message in enumerate(request.messages):
        if message.role is Role.ASSISTANT:  # sent back as the client got them
            items.extend(output_items(list(message.blocks), f"turn{n}", answering, SEALER, "completed"))
        elif message.role is Role.TOOL:
            for r in message.blocks:
                output = [{"type": "input_text", "text": r.content}] + [
                    {"type": "input_image", "image_url": i.url} for i in r.images
                ]
                kind = "custom_tool_call_output" if r.call_id in custom else "function_call_output"
                items.append(
                    {"type": kind, "call_id": r.call_id, "output": output if r.images else r.content}
                )
        elif message.role is Role.SYSTEM:
            items.append({"role": "developer", "content": message.text()})
        else:
            items.append({"role": "user", "content": [_responses_part(b) for b in message.blocks]})
    return {"model": request.model, "input": items}


def _responses_part(block: Block) -> dict:
    if type(block) is Text:
        return {"type": "input_text", "text": block.text}
    if type(block) is Image:
        return {"type": "input_image", "image_url": block.url} | (
            {"detail": block.detail} if block.detail else {}
        )
    return {"type": "input_file", "file_data": block.source} | (
        {"filename": block.title} if block.title else {}
    )


def messages_body(request: Request) -> dict:
    """As Claude Code and the anthropic SDK write it: the system on top, each answer's content
    sent back as the client got it, tool results as user content blocks, a system message in
    place (Claude Code sends them)."""
    asked = Inbound(Request(model="m", messages=()), context=messages.Context(omit_thinking=False))
    out: list[dict] = []
    for message in request.messages:
        if message.role is Role.ASSISTANT:
            answer = orjson.loads(
                messages.CODEC.answer(asked, Reply("msg_x", "m", 0), _turn(message), SEALER)
            )
            out.append({"role": "assistant", "content": answer["content"]})
        elif message.role is Role.TOOL:
            out.append({"role": "user", "content": [_tool_result_block(r) for r in message.blocks]})
        elif message.role is Role.SYSTEM:
            out.append({"role": "system", "content": message.text()})
        else:
            out.append({"role": "user", "content": [_messages_part(b) for b in message.blocks]})
    system = [{"type": "text", "text": t.text} for t in request.system]
    return {"model": request.model, "max_tokens": 1024, "messages": out} | (
        {"system": system} if system else {}
    )


def _messages_part(block: Block) -> dict:
    if type(block) is Text:
        return {"type": "text", "text": block.text}
    media, _, data = block.url.removeprefix("data:").partition(";base64,")
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def _tool_result_block(result: ToolResult) -> dict:
    content = [{"type": "text", "text": result.content}] + [_messages_part(i) for i in result.images]
    return {"type": "tool_result", "tool_use_id": result.call_id, "content": content}


# -- what each wire cannot express -------------------------------------------------------------------


def _tool_runs(messages: tuple[Message, ...], merge: bool) -> list[Message]:
    out: list[Message] = []
    for message in messages:
        if message.role is not Role.TOOL:
            out.append(message)
        elif not merge:
            out.extend(Message(Role.TOOL, (r,)) for r in message.blocks)
        elif out and out[-1].role is Role.TOOL:
            out[-1] = Message(Role.TOOL, out[-1].blocks + message.blocks)
        else:
            out.append(message)
    return out


def _echoed(block: Block) -> Block:
    if type(block) is Reasoning and block.meta is not None and block.meta.kind == "openai_responses":
        data = block.meta.data
        return Reasoning(block.text, echoed_native(data["id"], data["encrypted_content"], data["summary"]))
    return block


def _messages_echo(block: Block) -> Block | None:
    """Messages carries continuity on thinking blocks only (a text's or a call's is the store's
    to restore: tests/continuity); Anthropic's own token comes back as Anthropic issued it, with
    no issuer scope; an image has no detail."""
    if type(block) is Reasoning:
        token = anthropic_token(block.meta)
        if token is not None and token[0] == "signature":
            return anthropic_thinking(block.text, token[1])
        return block
    if type(block) is Text:
        return Text(block.text) if block.text else None
    if type(block) is ToolCall:
        return ToolCall(block.id, block.name, block.arguments)
    if type(block) is Image:
        return Image(block.url)
    return block


def _messages_normal(message: Message) -> Message:
    if message.role is Role.TOOL:
        results = tuple(
            ToolResult(r.call_id, r.content, r.is_error, tuple(Image(i.url) for i in r.images))
            for r in message.blocks
        )
        return Message(Role.TOOL, results)
    blocks = tuple(b for b in map(_messages_echo, message.blocks) if b is not None)
    return Message(message.role, blocks)


def normal(request: Request, dialect: str) -> tuple[tuple[Text, ...], tuple[Message, ...]]:
    if dialect == "messages":
        return request.system, tuple(_messages_normal(m) for m in request.messages)
    if dialect == "chat":
        return request.system, tuple(_tool_runs(request.messages, merge=False))
    messages = [
        Message(m.role, tuple(_echoed(b) for b in m.blocks)) for m in _tool_runs(request.messages, merge=True)
    ]
    return request.system, tuple(messages)


def decoded(codec, body: dict) -> tuple[tuple[Text, ...], tuple[Message, ...]]:
    inbound = codec.decode(orjson.loads(orjson.dumps(body)), {}, SEALER)
    assert inbound.ignored_tokens == 0
    return inbound.request.system, inbound.request.messages


@SETTINGS
@given(request=transcripts(rich=False))
def test_chat_completions_round_trips_the_transcript(request):
    assert decoded(chat.CODEC, chat_body(request)) == normal(request, "chat")


@pytest.mark.parametrize("summaries", [False, True], ids=["reasoning_content", "summaries"])
@SETTINGS
@given(request=transcripts(rich=True))
def test_responses_round_trips_the_transcript(summaries, request):
    assert decoded(responses.CODEC, responses_body(request, summaries)) == normal(request, "responses")


@SETTINGS
@given(request=transcripts(rich=False))
def test_anthropic_messages_round_trips_the_transcript(request):
    assert decoded(messages.CODEC, messages_body(request)) == normal(request, "messages")
