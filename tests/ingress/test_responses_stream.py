"""The Responses event stream and Response object the gateway writes: every event validates
against the openai SDK's own event models, carries the fields the recorded API streams carry,
and the stream always ends with a terminal event."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import get_args

import orjson
import pytest
from openai.types.responses import Response, ResponseStreamEvent

from gateway.ingress.responses.codec import CODEC
from gateway.ingress.responses.output import Answering
from gateway.ingress.responses.stream import ResponsesStreamEncoder
from gateway.ingress.responses.tools import ToolNames
from gateway.transcript.assembler import fold
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    ErrorCategory,
    Finish,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.model import Continuity, StopReason, Usage
from gateway.transcript.seal import Sealer
from tests.conftest import fixture_path

SEALER = Sealer(b"e" * 32)
# the SDK's model of each event type
MODELS = {
    get_args(m.model_fields["type"].annotation)[0]: m for m in get_args(get_args(ResponseStreamEvent)[0])
}


class EVENTS:  # noqa: N801 - reads like the TypeAdapter it stands for
    @staticmethod
    def validate_python(event: dict) -> None:
        MODELS[event["type"]].model_validate(event)


CLAUDE = Continuity("claude", "claude", "anthropic", "m", {"signature": "s"})
NAMES = ToolNames({"ns__run": ("ns", "run")}, {("ns", "run"): "ns__run"})
SHELL = {
    "model": "smart",
    "instructions": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "temperature": 1.0,
    "top_p": 1.0,
    "store": False,
}


def answering(summaries: bool = True, compaction: bool = False) -> Answering:
    return Answering(SHELL, NAMES, summaries=summaries, encrypted=True, compaction=compaction)


def canonical(stop: StopReason = StopReason.TOOL_CALLS) -> list:
    return [
        BlockStart(0, BlockKind.REASONING),
        BlockDelta(0, "Let me"),
        BlockDelta(0, " think."),
        BlockStop(0, CLAUDE),
        BlockStart(1, BlockKind.TEXT),
        BlockDelta(1, "Running."),
        BlockStop(1),
        BlockStart(2, BlockKind.TOOL_CALL, "call_aaaaaaaaaaaaaaaaaaaaaaaa", "ns__run"),
        BlockDelta(2, '{"cmd":'),
        BlockDelta(2, ' "ls"}'),
        BlockStop(2, CLAUDE),  # continuity on a call: carried by the turn's last reasoning item
        BlockStart(3, BlockKind.TOOL_CALL, "call_bbbbbbbbbbbbbbbbbbbbbbbb", "apply_patch", custom=True),
        BlockDelta(3, "*** Begin Patch"),
        BlockStop(3),
        BlockStart(4, BlockKind.TEXT),  # a text block with no text: no message item
        BlockStop(4),
        UsageUpdate(Usage(input_tokens=10, output_tokens=5, cache_read_tokens=4, reasoning_tokens=2)),
        Finish(stop),
    ]


def run(events: list, context: Answering, error: UpstreamError | None = None) -> list[dict]:
    encoder = ResponsesStreamEncoder(context, "resp_abc", 1700000000, SEALER)
    raw = encoder.start() + b"".join(encoder.event(e) or b"" for e in events)
    raw += encoder.error(error) if error is not None else encoder.finish()
    out = []
    for frame in raw.decode().split("\n\n"):
        if frame:
            name, data = frame.split("\n")
            event = json.loads(data.removeprefix("data: "))
            assert name == f"event: {event['type']}"
            out.append(event)
    return out


@pytest.mark.parametrize("summaries", [True, False])
def test_every_event_validates_against_the_sdk_models(summaries):
    events = run(canonical(), answering(summaries))
    for event in events:
        EVENTS.validate_python(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [i["type"] for i in done] == [
        "reasoning",
        "message",
        "function_call",
        "custom_tool_call",
        "reasoning",
    ]
    added = [e["item"]["id"] for e in events if e["type"] == "response.output_item.added"]
    assert added == [i["id"] for i in done]  # ids are stable from added to done
    assert (
        done[2]["name"] == "run" and done[2]["namespace"] == "ns" and done[2]["arguments"] == '{"cmd": "ls"}'
    )
    assert done[3]["input"] == "*** Begin Patch"
    final = Response.model_validate(events[-1]["response"])
    assert [o.id for o in final.output] == added
    assert final.usage.input_tokens_details.cached_tokens == 4
    assert final.usage.output_tokens_details.reasoning_tokens == 2
    reasoning = ("response.reasoning_summary_text.delta", "response.reasoning_text.delta")
    assert reasoning[0 if summaries else 1] in kinds and reasoning[1 if summaries else 0] not in kinds


def test_events_carry_every_field_the_recorded_api_stream_carries():
    path = fixture_path("openai-responses", "openai-reasoning-encrypted-content.1.chunks.txt")
    recorded: dict[str, set[str]] = defaultdict(set)
    for line in path.read_text().splitlines():
        event = json.loads(line)
        recorded[event["type"]] |= set(event) - {"obfuscation"}  # a per-event nonce against side channels
    ours: dict[str, set[str]] = defaultdict(set)
    for event in run(canonical(), answering()):
        ours[event["type"]] |= set(event)
    for kind, fields in recorded.items():
        assert fields <= ours[kind], f"{kind} lacks {fields - ours[kind]}"


@pytest.mark.parametrize(
    "stop,terminal,reason",
    [
        (StopReason.MAX_TOKENS, "response.incomplete", "max_output_tokens"),
        (StopReason.CONTENT_FILTER, "response.incomplete", "content_filter"),
        (StopReason.ERROR, "response.failed", None),
    ],
)
def test_unfinished_answers_end_with_their_terminal_event(stop, terminal, reason):
    events = run(canonical(stop), answering())
    assert events[-1]["type"] == terminal
    EVENTS.validate_python(events[-1])
    response = events[-1]["response"]
    assert (response["incomplete_details"] or {}).get("reason") == reason


def test_a_failure_after_the_first_byte_is_an_error_then_response_failed():
    error = UpstreamError(ErrorCategory.RATE_LIMIT, "slow down")
    events = run(canonical()[:6], answering(), error)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    for event in events:
        EVENTS.validate_python(event)
    assert events[-1]["response"]["error"] == {"code": "rate_limit_exceeded", "message": "slow down"}


def test_a_compaction_answer_is_exactly_one_compaction_item():
    events = run(canonical(StopReason.END_TURN), answering(compaction=True))
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [i["type"] for i in done] == ["compaction"]
    assert events[-1]["type"] == "response.completed"
    assert [o["type"] for o in events[-1]["response"]["output"]] == ["compaction"]


def test_the_whole_answer_is_a_fold_of_the_same_events():
    from gateway.ingress.base import Inbound, Reply

    streamed = run(canonical(), answering())[-1]["response"]
    inbound = Inbound(None, context=answering())  # type: ignore[arg-type]
    whole = orjson.loads(
        CODEC.answer(inbound, Reply("resp_abc", "smart", 1700000000), fold(canonical()), SEALER)
    )
    Response.model_validate(whole)
    assert whole == {**streamed, "output": whole["output"]}
    assert [o["id"] for o in whole["output"]] == [o["id"] for o in streamed["output"]]
