"""Every rich block kind x every family: images and documents (user messages and tool results),
server-tool history and citations of each issuer go through prepare -> the family's encoder ->
its strict simulator, which accepts; nothing is silently lost (what does not go out as itself is
a counted repair); repair stays idempotent and lets no other issuer's data out."""

from __future__ import annotations

import base64

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.providers import gemini_grounding, get_adapter
from gateway.repair import prepare
from gateway.simulators.anthropic_rules import search_result_content
from gateway.simulators.registry import VALIDATORS
from gateway.transcript.model import (
    ANY_ISSUER,
    Block,
    Continuity,
    Document,
    Image,
    Message,
    Request,
    Role,
    ServerToolCall,
    ServerToolResult,
    Text,
    ToolResult,
    replace,
)
from gateway.transcript.target import Target
from gateway.wire import anthropic_server, openai_server
from tests.property.transcripts import KINDS, MODELS, PNG, state_for, target_for, valid_requests

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GIF = "data:image/gif;base64,R0lGODlhAQABAAAAACw="
IMAGES = {
    "png": Image(PNG),
    "url": Image("https://example.com/cat.png", "low"),
    "gif": Image(GIF),
    "tiff": Image("data:image/tiff;base64,SUkqAA=="),  # no family takes TIFF
}
DOCUMENTS = {
    "pdf": Document("data:application/pdf;base64,JVBERi0xLjQK", "application/pdf", "report.pdf"),
    "pdf_url": Document("https://example.com/report.pdf", "application/pdf", "report"),
    "text": Document(
        "data:text/plain;base64," + base64.b64encode(b"meeting notes").decode(), "text/plain", "notes"
    ),
    "docx": Document("data:application/msword;base64,0M8R4A==", "application/msword", "memo.doc"),
}
URL = "https://example.com/weather"
ISSUERS = ("anthropic_own", "anthropic_client", "openai_own", "openai_client", "gemini_own")
GROUNDING = {
    "webSearchQueries": ["weather in Paris"],
    "groundingChunks": [{"web": {"uri": URL, "title": "Weather"}}],
    "groundingSupports": [{"segment": {"text": "Sunny"}, "groundingChunkIndices": [0]}],
}


def _stamp(kind: str, target: Target, own: bool):
    def stamp(data):
        if own and target.kind == kind:
            return target.continuity(data)
        return Continuity("client", ANY_ISSUER, kind, ANY_ISSUER, dict(data))

    return stamp


def server_blocks(issuer: str, target: Target, serial: int) -> tuple[Block, ...]:
    """A web search as its issuer returned it (decoded by the issuer's own module), and a text
    citing it."""
    kind = {"anthropic": "anthropic", "openai": "openai_responses", "gemini": "gemini"}[issuer.split("_")[0]]
    stamp = _stamp(kind, target, issuer.endswith("own"))
    if kind == "gemini":  # grounding metadata: the search and its sources, no citation block
        blocks = gemini_grounding.grounding_blocks(GROUNDING, stamp, f"grounding_{serial}")
        assert blocks is not None
        return (*blocks, Text("Sunny today."))
    if kind == "anthropic":
        call_id = f"srvtoolu_{serial:04d}"
        call = anthropic_server.server_call(
            {"type": "server_tool_use", "id": call_id, "name": "web_search", "input": {"query": "weather"}},
            stamp,
        )
        # the search result's content as the Anthropic simulator encrypts it (so Anthropic accepts
        # it back; any other target gets its readable fields)
        content = search_result_content(state_for("anthropic"), URL)
        page = {"type": "web_search_result", "url": URL, "title": "Weather", "encrypted_content": content}
        result = anthropic_server.server_result(
            {"type": "web_search_tool_result", "tool_use_id": call_id, "content": [page]}, stamp
        )
        cite = {"type": "web_search_result_location", "url": URL, "title": "Weather", "cited_text": "sunny"}
        citation = anthropic_server.citation(cite, stamp)
    else:
        item = {
            "type": "web_search_call",
            "id": f"ws_{serial:04d}",
            "status": "completed",
            "action": {"type": "search", "query": "weather", "sources": [{"type": "url", "url": URL}]},
        }
        call, result = openai_server.server_item(item, stamp, "ws")
        note = {"type": "url_citation", "url": URL, "title": "Weather", "start_index": 0, "end_index": 5}
        citation = openai_server.annotation(note, "Sunny today.", stamp)
    return call, result, Text("Sunny today.", citations=(citation,))


@st.composite
def rich_requests(draw: st.DrawFn, target: Target) -> Request:
    caps = get_adapter(target.kind).capabilities
    base = draw(valid_requests(target, caps.reasoning_content_on_tool_turns, caps.reasoning_replay))
    media = st.lists(st.sampled_from([*IMAGES.values(), *DOCUMENTS.values()]), max_size=3)
    messages: list[Message] = []
    serial = 0
    for message in base.messages:
        blocks = list(message.blocks)
        if message.role is Role.USER and draw(st.booleans()):
            blocks.extend(draw(media))
        elif message.role is Role.TOOL:
            first = blocks[0]
            assert type(first) is ToolResult
            attached = draw(media)
            blocks[0] = replace(
                first,
                images=tuple(m for m in attached if type(m) is Image),
                documents=tuple(m for m in attached if type(m) is Document),
            )
        elif message.role is Role.ASSISTANT and draw(st.booleans()):
            serial += 1
            at = next((n for n, b in enumerate(blocks) if type(b).__name__ != "Reasoning"), len(blocks))
            issuer = draw(st.sampled_from(ISSUERS))
            blocks[at:at] = server_blocks(issuer, target, serial)
        messages.append(Message(message.role, tuple(blocks)))
    return replace(base, messages=tuple(messages))


def _media(messages: tuple[Message, ...]) -> int:
    count = 0
    for message in messages:
        for block in message.blocks:
            t = type(block)
            if t is Image or t is Document:
                count += 1
            elif t is ToolResult:
                count += len(block.images) + len(block.documents)
    return count


def _count(messages: tuple[Message, ...], kinds: tuple[type, ...]) -> int:
    return sum(1 for m in messages for b in m.blocks if type(b) in kinds)


def _cited(messages: tuple[Message, ...]) -> int:
    return sum(1 for m in messages for b in m.blocks if type(b) is Text and b.citations)


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_rich_blocks_reach_every_family_or_are_counted(kind, data):
    target = target_for(kind, data.draw(st.booleans(), label="thinking"), "drop", MODELS[kind])
    request = data.draw(rich_requests(target), label="request")
    caps = get_adapter(kind).capabilities
    snapshot = repr(request)

    prepared = prepare(request, target, caps)

    assert repr(request) == snapshot, "prepare mutated its input"
    body = orjson.loads(get_adapter(kind).encode_request(prepared.request, target, "sim-key").body)
    rejection = VALIDATORS[kind](state_for(kind), body, target.model)
    assert rejection is None, f"{rejection.message}\nbody: {body}"
    again = prepare(prepared.request, target, caps)
    assert again.repairs == () and again.request == prepared.request

    counts: dict[str, int] = {}
    for repair in prepared.repairs:
        counts[repair.kind] = counts.get(repair.kind, 0) + 1
    inlined = sum(
        1 for r in prepared.repairs if r.kind == "tool_result_media_moved" and "plain-text" in r.detail
    )
    out = prepared.request.messages
    assert _media(request.messages) == _media(out) + counts.get("media_as_placeholder", 0) + inlined
    server = (ServerToolCall, ServerToolResult)
    assert _count(request.messages, server) == _count(out, server) + counts.get("server_tool_as_text", 0)
    assert _cited(request.messages) == _cited(out) + counts.get("citations_as_text", 0)
    for message in out:
        for block in message.blocks:
            meta = getattr(block, "meta", None)
            assert meta is None or target.owns(meta), f"another issuer's data went out: {block}"
            for citation in getattr(block, "citations", ()):
                assert target.owns(citation.meta)
