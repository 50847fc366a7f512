"""Custom (freeform) tools for targets without them, and hosted tools for targets that cannot run
them: pure passes, through `prepare` for every provider kind."""

from __future__ import annotations

import orjson
import pytest

from gateway.providers import get_adapter
from gateway.providers.base import EncodeError
from gateway.repair import prepare
from gateway.transcript.model import (
    HostedTool,
    Message,
    Request,
    Role,
    Text,
    ToolCall,
    ToolKind,
    ToolResult,
    ToolSpec,
)
from gateway.transcript.target import Target
from tests.property.transcripts import KINDS, MODELS

PATCH = "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"
GRAMMAR = {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}
APPLY_PATCH = ToolSpec("apply_patch", "Edit files.", kind=ToolKind.CUSTOM, format=GRAMMAR)
SEARCH = ToolSpec("search", "Search.", {"type": "object", "properties": {"q": {"type": "string"}}})
WEB = HostedTool("openai_responses", "web_search", {"type": "web_search"})


def request(hosted=(WEB,)) -> Request:
    return Request(
        model="m",
        messages=(
            Message(Role.USER, (Text("Add a.txt"),)),
            Message(Role.ASSISTANT, (ToolCall("call_1", "apply_patch", PATCH, custom=True),)),
            Message(Role.TOOL, (ToolResult("call_1", "Done"),)),
        ),
        tools=(APPLY_PATCH, SEARCH),
        hosted_tools=hosted,
    )


def target(kind: str) -> Target:
    return Target("p", kind, MODELS[kind], "http://sim.invalid")


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "openai_responses"])
def test_custom_tools_become_one_string_functions(kind):
    original = request()
    snapshot = repr(original)
    prepared = prepare(original, target(kind), get_adapter(kind).capabilities)
    assert repr(original) == snapshot, "prepare mutated its input"
    tool = prepared.request.tools[0]
    assert tool.kind is ToolKind.FUNCTION and tool.name == "apply_patch"
    assert tool.parameters["required"] == ["input"]
    assert "lark grammar" in tool.description and "start: /.+/" in tool.description
    assert prepared.request.tools[1] == SEARCH
    (call,) = prepared.request.messages[1].tool_calls()
    assert not call.custom and orjson.loads(call.arguments) == {"input": PATCH}
    assert prepared.custom_tools == {"apply_patch"}
    kinds = [r.kind for r in prepared.repairs]
    assert kinds.count("custom_tool_as_function") == 2 and kinds.count("hosted_tool_dropped") == 1
    assert prepared.request.hosted_tools == ()
    again = prepare(prepared.request, target(kind), get_adapter(kind).capabilities)
    assert not [r for r in again.repairs if r.kind in ("custom_tool_as_function", "hosted_tool_dropped")]
    get_adapter(kind).encode_request(prepared.request, target(kind), "k")  # encodes


def test_openai_responses_takes_both_natively():
    prepared = prepare(request(), target("openai_responses"), get_adapter("openai_responses").capabilities)
    assert prepared.request.tools == request().tools and prepared.request.hosted_tools == (WEB,)
    assert prepared.custom_tools == frozenset()
    body = orjson.loads(
        get_adapter("openai_responses").encode_request(prepared.request, target("openai_responses"), "k").body
    )
    assert body["tools"][0] == {
        "type": "custom",
        "name": "apply_patch",
        "description": "Edit files.",
        "format": GRAMMAR,
    }
    assert body["tools"][2] == {"type": "web_search"}
    call, output = (
        i for i in body["input"] if i.get("type") in ("custom_tool_call", "custom_tool_call_output")
    )
    assert call == {
        "type": "custom_tool_call",
        "call_id": call["call_id"],
        "name": "apply_patch",
        "input": PATCH,
    }
    assert output["type"] == "custom_tool_call_output" and output["output"] == "Done"


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "openai_responses"])
def test_a_required_hosted_tool_makes_the_target_refuse(kind):
    required = HostedTool("openai_responses", "file_search", {"type": "file_search"}, required=True)
    prepared = prepare(request((required,)), target(kind), get_adapter(kind).capabilities)
    assert prepared.request.hosted_tools == (required,)
    with pytest.raises(EncodeError, match="file_search"):
        get_adapter(kind).encode_request(prepared.request, target(kind), "k")


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "openai_responses"])
def test_a_custom_call_that_skipped_repair_is_refused(kind):
    raw = request(())
    with pytest.raises(EncodeError):
        get_adapter(kind).encode_request(raw, target(kind), "k")
