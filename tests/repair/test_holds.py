"""`prepare` skips the passes whose subject the transcript does not hold (gateway/repair/holds.py):
the prepared request, its repairs, provider ids and custom tools are exactly those of every pass
run (`found=EVERYTHING`), for any transcript, target and mode; an unchanged request comes back as
the same object either way."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from gateway.providers import KINDS, get_adapter
from gateway.repair import prepare
from gateway.repair.holds import EVERYTHING, Holds, holds
from gateway.transcript.model import (
    Block,
    CacheControl,
    Citation,
    Continuity,
    Document,
    HostedTool,
    Image,
    Message,
    Reasoning,
    Request,
    Role,
    ServerToolCall,
    ServerToolResult,
    Source,
    Text,
    ToolCall,
    ToolKind,
    ToolResult,
    ToolSpec,
)
from gateway.transcript.target import Target
from tests.property.test_rich_content import rich_requests
from tests.property.transcripts import MODELS, requests, target_for

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CACHE = CacheControl()
TIFF = "data:image/tiff;base64,SUkqAA=="  # no family takes it: a placeholder


def _targets() -> st.SearchStrategy[Target]:
    return st.builds(
        target_for,
        st.sampled_from(KINDS),
        st.booleans(),
        st.sampled_from(["drop", "as_text"]),
    )


def _meta(target_kind: str) -> st.SearchStrategy[Continuity | None]:
    """No meta, the target's own (same provider entry and model as target_for's), or another's."""
    return st.sampled_from(
        [
            None,
            Continuity("primary", "primary", target_kind, MODELS[target_kind], {"native_id": "n1"}),
            Continuity("other", "other", "anthropic", "claude-x", {"signature": "s"}),
        ]
    )


# The strategies the composites draw from, built once: a strategy built inside a draw is built and
# validated again at every draw; the same strategies, the same draws. (`_meta`'s are built per
# block: the Continuity each holds is a block's own.)
_CACHE = st.sampled_from([None, CACHE])
_TEXT = st.sampled_from(["", " ", "\n", "Hello.", "Done. ", "x"])
_USER_KINDS = ["text", "image", "document"]
_ASSISTANT_KINDS = ["reasoning", "call", "custom_call", "server_call", "server_result", "cited"]
_KINDS = {
    Role.USER: st.sampled_from(_USER_KINDS),
    Role.ASSISTANT: st.sampled_from(_USER_KINDS + _ASSISTANT_KINDS),
    Role.TOOL: st.sampled_from(["result", "result_media"]),
}
_CALL_NUMBERS = st.integers(0, 3)


@st.composite
def _block(draw: st.DrawFn, role: Role, target_kind: str, serial: int) -> Block:
    meta = _meta(target_kind)
    kind = draw(_KINDS[role])
    call_id = f"call_{draw(_CALL_NUMBERS)}"
    if kind == "text":
        return Text(draw(_TEXT), draw(meta), draw(_CACHE))
    if kind == "cited":
        return Text(draw(_TEXT), citations=(Citation("https://example.com", "t", "c", draw(meta)),))
    if kind == "image":
        return Image("https://example.com/a.png", None, draw(_CACHE))
    if kind == "document":
        return Document("https://example.com/a.pdf", "application/pdf", "a", draw(_CACHE))
    if kind == "reasoning":
        return Reasoning(draw(_TEXT), draw(meta))
    if kind in ("call", "custom_call"):
        return ToolCall(call_id, "search", '{"q": "x"}', draw(meta), kind == "custom_call", draw(_CACHE))
    if kind == "server_call":
        return ServerToolCall(f"srv_{serial}", "web_search", '{"query": "q"}', draw(meta))
    if kind == "server_result":
        return ServerToolResult(
            f"srv_{serial}", "web_search", (Source("https://example.com"),), "r", False, draw(meta)
        )
    images = (Image("https://example.com/b.png"),) if kind == "result_media" else ()
    return ToolResult(call_id, draw(_TEXT), False, images, draw(_CACHE))


_MESSAGE_COUNTS = st.integers(1, 6)
_ROLES = st.sampled_from([Role.USER, Role.USER, Role.ASSISTANT, Role.ASSISTANT, Role.TOOL, Role.SYSTEM])
_BLOCK_COUNTS = st.integers(0, 3)
_TOOL_BLOCK_COUNTS = st.integers(1, 3)
_MAX_TOKENS = st.sampled_from([None, 512, 9000])


@st.composite
def sparse_requests(draw: st.DrawFn, target: Target) -> Request:
    """Transcripts holding few block kinds (most hold nothing most passes act on), with every
    kind possible: blank text, empty messages, cache marks, custom calls, media, server tools,
    reasoning, continuity of several issuers, system messages in place."""
    messages = []
    for serial in range(draw(_MESSAGE_COUNTS)):
        role = draw(_ROLES)
        block_role = Role.USER if role is Role.SYSTEM else role
        count = draw(_TOOL_BLOCK_COUNTS if role is Role.TOOL else _BLOCK_COUNTS)
        blocks = tuple(draw(_block(block_role, target.kind, serial)) for _ in range(count))
        if role is Role.SYSTEM:
            blocks = tuple(b for b in blocks if type(b) is Text)
        messages.append(Message(role, blocks))
    tools = draw(
        st.sampled_from(
            [
                (),
                (ToolSpec("search"),),
                (ToolSpec("search", cache=CACHE),),
                (ToolSpec("search", kind=ToolKind.CUSTOM),),
            ]
        )
    )
    hosted = draw(
        st.sampled_from(
            [(), (HostedTool("anthropic", "web_search_20250305", {"type": "web_search_20250305"}),)]
        )
    )
    options = draw(st.sampled_from([{}, {"anthropic": {"betas": ("context-1m-2025-08-07",)}}]))
    return Request(
        model="group",
        messages=tuple(messages),
        system=draw(st.sampled_from([(), (Text("Be terse."),), (Text("Be terse.", cache=CACHE),)])),
        tools=tools,
        hosted_tools=hosted,
        provider_options=options,
        max_tokens=draw(_MAX_TOKENS),
    )


def _same(request: Request, target: Target, strict: bool) -> None:
    caps = get_adapter(target.kind).capabilities
    skipping = prepare(request, target, caps, strict)
    every = prepare(request, target, caps, strict, found=EVERYTHING)
    assert skipping == every
    assert (skipping.request is request) == (every.request is request)
    again = prepare(skipping.request, target, caps, strict)  # the prepared request, found anew
    assert again == prepare(skipping.request, target, caps, strict, found=EVERYTHING)


@SETTINGS
@given(st.data(), _targets(), st.booleans())
def test_skipping_passes_changes_nothing_on_sparse_transcripts(data, target, strict):
    _same(data.draw(sparse_requests(target)), target, strict)


@SETTINGS
@given(st.data(), _targets(), st.booleans())
def test_skipping_passes_changes_nothing_on_agent_transcripts(data, target, strict):
    _same(data.draw(requests(target, strict)), target, strict)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(KINDS), st.booleans())
def test_skipping_passes_changes_nothing_on_rich_transcripts(data, kind, strict):
    target = target_for(kind)
    _same(data.draw(rich_requests(target)), target, strict)


def test_a_plain_question_holds_nothing_a_pass_acts_on():
    request = Request("m", (Message(Role.USER, (Text("What is six times seven?"),)),))
    assert holds(request.messages) == Holds(*(False,) * 9)


@pytest.mark.parametrize(
    "block, flag",
    [
        (Text(""), "blank"),
        (Text("x", cache=CACHE), "cached"),
        (Image(TIFF), "media"),
        (ToolResult("c", "r", images=(Image(TIFF),)), "media"),
        (Text("x", citations=(Citation("u"),)), "server"),
        (Reasoning("r"), "reasoning"),
        (ToolCall("c", "f", "{}", custom=True), "custom_calls"),
    ],
)
def test_what_hiding_a_holding_would_change_is_caught(block, flag):
    """The comparison above can fail: with a flag wrongly cleared the pass it guards is skipped
    and the result differs from every pass run (Anthropic: blank text refused, 4 breakpoints...)."""
    target = target_for("anthropic")
    caps = get_adapter("anthropic").capabilities
    blocks = (block,) * (5 if flag == "cached" else 1)
    question, answer = (Text("q"),), (Text("a"),)
    if flag in ("server", "reasoning", "custom_calls"):
        answer = (*blocks, *answer)
    else:
        question = (*blocks, *question)
    request = Request(
        "m", (Message(Role.USER, question), Message(Role.ASSISTANT, answer), Message(Role.USER, (Text("b"),)))
    )
    found = holds(request.messages)
    assert getattr(found, flag)
    hidden = replace(found, **{flag: False})
    assert prepare(request, target, caps, found=hidden) != prepare(request, target, caps, found=EVERYTHING)


def test_an_unknown_block_kind_is_an_error_not_a_skip():
    with pytest.raises(TypeError, match="unknown block kind"):
        holds((Message(Role.USER, (object(),)),))  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", [k for k in KINDS if get_adapter(k).capabilities.blank_text_forbidden])
def test_a_final_assistant_text_ending_in_whitespace_is_trimmed_as_by_every_pass(kind):
    """Nothing blank, yet `drop_empty_text` has work: the target refuses the trailing space."""
    target = target_for(kind)
    request = Request("m", (Message(Role.USER, (Text("q"),)), Message(Role.ASSISTANT, (Text("Done. "),))))
    assert not holds(request.messages).blank
    _same(request, target, False)
    prepared = prepare(request, target, get_adapter(kind).capabilities)
    assert [b.text for m in prepared.request.messages for b in m.blocks if type(b) is Text][-1] != "Done. "


@pytest.mark.parametrize("kind", [k for k in KINDS if get_adapter(k).capabilities.blank_text_forbidden])
def test_reasoning_retired_as_blank_text_is_dropped_as_by_every_pass(kind):
    """Dropping reasoning leaves a transcript without blank text without any (prepare then skips
    `drop_empty_text`), retiring it as text does not: whitespace-only reasoning becomes blank text
    the target refuses."""
    target = target_for(kind, policy="as_text")
    foreign = Continuity("other", "other", "anthropic", "claude-x", {"signature": "s"})
    request = Request(
        "m",
        (
            Message(Role.USER, (Text("q"),)),
            Message(Role.ASSISTANT, (Reasoning(" ", foreign), Text("a"))),
            Message(Role.USER, (Text("b"),)),
        ),
    )
    assert not holds(request.messages).blank
    _same(request, target, False)
    prepared = prepare(request, target, get_adapter(kind).capabilities)
    assert " " not in [b.text for m in prepared.request.messages for b in m.blocks if type(b) is Text]
