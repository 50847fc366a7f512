"""The Responses simulator's custom (freeform) and hosted tools: accepted in their API shapes,
custom calls answered by custom outputs only, custom calls rendered and streamed like the API
(and read back by the gateway's Responses decoder)."""

from __future__ import annotations

import aiohttp
import pytest

from gateway.providers.openai_responses.decode import ResponsesStreamDecoder
from gateway.simulators.base import Reply, SimulatorHub, SimulatorState, ToolCallSpec
from gateway.simulators.openai_responses import validate
from gateway.transcript.assembler import fold
from gateway.transcript.target import Target

MODEL = "gpt-5.1"
CUSTOM = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
}
WEB = {"type": "web_search", "external_web_access": True, "search_content_types": ["text", "image"]}


def req(items, **extra) -> dict:
    return {"model": MODEL, "input": items, "store": False, **extra}


def rejection(body: dict):
    return validate(SimulatorState("openai_responses"), body, MODEL)


def test_custom_and_hosted_tools_are_accepted():
    assert (
        rejection(req("hi", tools=[CUSTOM, WEB], tool_choice={"type": "custom", "name": "apply_patch"}))
        is None
    )


@pytest.mark.parametrize(
    "tool,message",
    [
        (
            {**CUSTOM, "format": {"type": "grammar", "syntax": "ebnf", "definition": "x"}},
            "Invalid value: 'ebnf'",
        ),
        ({**WEB, "nope": 1}, "Unknown parameter: 'tools[0].nope'."),
        ({"type": "shell"}, "Invalid value: 'shell'"),
    ],
)
def test_malformed_tools_are_refused(tool, message):
    assert message in rejection(req("hi", tools=[tool])).message


def test_a_custom_call_needs_a_custom_output():
    call = {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch", "input": "x"}
    wrong = {"type": "function_call_output", "call_id": "call_1", "output": "ok"}
    right = {"type": "custom_tool_call_output", "call_id": "call_1", "output": "ok"}
    assert rejection(req([{"role": "user", "content": "hi"}, call, right], tools=[CUSTOM])) is None
    refused = rejection(req([{"role": "user", "content": "hi"}, call, wrong], tools=[CUSTOM]))
    assert refused.message == "No tool call found for function call output with call_id call_1."
    missing = rejection(req([{"role": "user", "content": "hi"}, call], tools=[CUSTOM]))
    assert missing.message == "No tool output found for custom tool call call_1."


async def test_a_scripted_call_of_a_custom_tool_streams_as_a_custom_tool_call():
    async with SimulatorHub() as hub:
        hub.states["openai_responses"].push(
            Reply(
                reasoning="Patch.",
                tool_calls=[ToolCallSpec("apply_patch", {"input": "*** Begin Patch\n"})],
                chunk_size=5,
            )
        )
        body = req(
            "hi",
            tools=[CUSTOM],
            stream=True,
            reasoning={"effort": "low", "summary": "auto"},
            include=["reasoning.encrypted_content"],
        )
        async with aiohttp.ClientSession() as http:
            url = hub.base_url("openai_responses") + "/responses"
            async with http.post(url, json=body, headers={"Authorization": "Bearer sim-key"}) as response:
                raw = await response.read()
    assert b"response.custom_tool_call_input.delta" in raw and b"response.custom_tool_call_input.done" in raw
    target = Target("openai", "openai_responses", MODEL, "http://sim.invalid")
    decoder = ResponsesStreamDecoder(target)
    turn = fold(decoder.feed(raw) + decoder.finish())
    (call,) = turn.tool_calls()
    assert call.custom and call.name == "apply_patch" and call.arguments == "*** Begin Patch\n"
    assert call.meta.data["item_id"].startswith("ctc_")
