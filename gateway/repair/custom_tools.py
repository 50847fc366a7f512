"""Custom (freeform) tools for targets that only take function tools.

A custom tool takes free text (optionally constrained by a grammar) instead of a JSON object. For a
target without `capabilities.custom_tools` it becomes a function tool taking one string,
`{"input": string}`, whose description carries the grammar; the custom calls already in the
transcript become calls of that function with their raw text as the `input` string. Answers map
back (gateway.routing.answer.CustomCallMapper): a call of such a function reaches the client as a
custom call with the raw text again. Counted `custom_tool_as_function`, once per tool and per call.
"""

from __future__ import annotations

import orjson

from gateway.repair.report import Repair
from gateway.transcript.model import Block, Message, ToolCall, ToolKind, ToolSpec, replace
from gateway.transcript.target import Capabilities

INPUT_FIELD = "input"
_INPUT_DESCRIPTION = "The tool's input: free text, passed to the tool exactly as written (not JSON)."


def custom_input(text: str) -> str:
    """A custom call's raw text as the arguments of its function form."""
    return orjson.dumps({INPUT_FIELD: text}).decode()


def function_form(tool: ToolSpec) -> ToolSpec:
    description = tool.description
    fmt = tool.format or {}
    if fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
        syntax = fmt.get("syntax") or "grammar"
        note = f"The `{INPUT_FIELD}` string must follow this {syntax} grammar:\n{fmt['definition']}"
        description = f"{description}\n\n{note}" if description else note
    parameters = {
        "type": "object",
        "properties": {INPUT_FIELD: {"type": "string", "description": _INPUT_DESCRIPTION}},
        "required": [INPUT_FIELD],
        "additionalProperties": False,
    }
    return ToolSpec(tool.name, description, parameters, ToolKind.FUNCTION, tool.strict, None, tool.cache)


def custom_tools_as_functions(
    tools: tuple[ToolSpec, ...], messages: tuple[Message, ...], caps: Capabilities
) -> tuple[tuple[ToolSpec, ...], tuple[Message, ...], frozenset[str], list[Repair]]:
    """(tools, messages, names of the tools now in function form, repairs). Returns its inputs
    when the target takes custom tools or there are none."""
    if caps.custom_tools:
        return tools, messages, frozenset(), []
    repairs: list[Repair] = []
    names: set[str] = set()
    if any(t.kind is ToolKind.CUSTOM for t in tools):
        converted = []
        for tool in tools:
            if tool.kind is ToolKind.CUSTOM:
                converted.append(function_form(tool))
                names.add(tool.name)
                repairs.append(Repair("custom_tool_as_function", f"tool {tool.name}"))
            else:
                converted.append(tool)
        tools = tuple(converted)
    out: list[Message] | None = None
    for n, message in enumerate(messages):
        if not any(type(b) is ToolCall and b.custom for b in message.blocks):
            if out is not None:
                out.append(message)
            continue
        if out is None:
            out = list(messages[:n])
        blocks: list[Block] = []
        for block in message.blocks:
            if type(block) is ToolCall and block.custom:
                block = replace(block, arguments=custom_input(block.arguments), custom=False)
                repairs.append(Repair("custom_tool_as_function", f"call {block.id}"))
            blocks.append(block)
        out.append(Message(message.role, tuple(blocks)))
    return tools, (tuple(out) if out is not None else messages), frozenset(names), repairs
