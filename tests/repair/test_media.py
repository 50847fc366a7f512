"""The media pass: each family's MediaRule decides where a tool's images and documents go and
what a model cannot read; the simulators judge the result."""

from __future__ import annotations

import orjson
import pytest

from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.repair.media import place_media
from gateway.simulators.registry import VALIDATORS
from gateway.transcript.model import Document, Image, Message, Request, Role, Text, ToolCall, ToolResult
from tests.property.transcripts import KINDS, PNG, state_for, target_for

BIG = Image("data:image/png;base64," + "A" * (8 * 1024 * 1024))  # 6 MB once decoded
PDF = Document("data:application/pdf;base64,JVBERi0xLjQK", "application/pdf", "report.pdf")


def shot(*media) -> Request:
    result = ToolResult(
        "call_1",
        "the screen",
        images=tuple(m for m in media if type(m) is Image),
        documents=tuple(m for m in media if type(m) is Document),
    )
    return Request(
        "group",
        (
            Message(Role.USER, (Text("Look at the screen."),)),
            Message(Role.ASSISTANT, (ToolCall("call_1", "screenshot", "{}"),)),
            Message(Role.TOOL, (result,)),
        ),
    )


def sent(kind: str, request: Request, model: str | None = None):
    target = target_for(kind, model=model)
    caps = get_adapter(kind).capabilities
    prepared = prepare(request, target, caps)
    body = orjson.loads(get_adapter(kind).encode_request(prepared.request, target, "k").body)
    rejection = VALIDATORS[kind](state_for(kind), body, target.model)
    assert rejection is None, rejection.message
    assert prepare(prepared.request, target, caps).repairs == ()
    return prepared, orjson.dumps(body).decode()


@pytest.mark.parametrize("kind", KINDS)
def test_a_screenshot_and_a_pdf_from_a_tool_reach_every_family(kind):
    prepared, body = sent(kind, shot(Image(PNG), PDF))
    kinds = [r.kind for r in prepared.repairs]
    rule = get_adapter(kind).capabilities.media
    if rule.tool_result_images.value == "inline":
        assert "tool_result_media_moved" not in kinds and PNG.split(",")[1] in body
    elif rule.sees_images(target_for(kind).model):
        assert "tool_result_media_moved" in kinds and PNG.split(",")[1] in body
        last = prepared.request.messages[-1]
        assert last.role is Role.USER and any(type(b) is Image for b in last.blocks), (
            "right after the results"
        )
    else:
        assert "[image omitted:" in body and "media_as_placeholder" in kinds


@pytest.mark.parametrize("kind", KINDS)
def test_an_image_over_the_familys_size_limit_is_a_placeholder(kind):
    rule = get_adapter(kind).capabilities.media
    prepared, body = sent(kind, shot(BIG))
    if (
        rule.max_image_bytes is not None
        and rule.max_image_bytes < 6 * 1024 * 1024
        or not rule.sees_images(target_for(kind).model)
    ):
        assert "media_as_placeholder" in [r.kind for r in prepared.repairs]
        assert "AAAAAAAA" not in body
    else:
        assert "AAAAAAAA" in body


def test_moved_media_follow_the_whole_run_of_tool_messages():
    """Chat wires: one tool message per result; the user message with the images comes after the
    last of them (a user message between two tool messages would break the pairing)."""
    messages = (
        Message(Role.USER, (Text("q"),)),
        Message(Role.ASSISTANT, (ToolCall("a", "s", "{}"), ToolCall("b", "s", "{}"))),
        Message(Role.TOOL, (ToolResult("a", "x", images=(Image(PNG),)),)),
        Message(Role.TOOL, (ToolResult("b", "y"),)),
    )
    target = target_for("openai_chat")
    out, repairs = place_media(messages, target, get_adapter("openai_chat").capabilities)
    assert [m.role for m in out] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.USER]
    assert out[4].blocks == (Image(PNG),) and "continues in the next message" in out[2].blocks[0].content
    assert [r.kind for r in repairs] == ["tool_result_media_moved"]
    assert place_media(out, target, get_adapter("openai_chat").capabilities) == (out, [])
