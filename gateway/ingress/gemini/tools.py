"""A Gemini request's `tools` (function declarations and Google's built-in tools) and its
`toolConfig`, as canonical tools and tool choice (gateway/ingress/gemini/decode.py)."""

from __future__ import annotations

from typing import Any

from gateway.ingress.budget import KnownList
from gateway.ingress.errors import ClientError, invalid
from gateway.ingress.gemini.fields import GEMINI, array, obj, string
from gateway.ingress.gemini.schema import json_schema
from gateway.ingress.tool_lists import ToolLists
from gateway.ingress.typed_items import TypedItems
from gateway.transcript.model import HostedTool, ToolChoice, ToolChoiceMode, ToolSpec

# Google's built-in tools: they run on Google's side, so only a Gemini target can serve them
BUILT_IN_TOOLS = (
    "googleSearch",
    "googleSearchRetrieval",
    "urlContext",
    "codeExecution",
    "fileSearch",
    "googleMaps",
    "computerUse",
    "enterpriseWebSearch",
)
MODES = {
    "AUTO": ToolChoiceMode.AUTO,
    "MODE_UNSPECIFIED": ToolChoiceMode.AUTO,
    "VALIDATED": ToolChoiceMode.AUTO,
    "NONE": ToolChoiceMode.NONE,
    "ANY": ToolChoiceMode.REQUIRED,
}


def tools_of(raw: Any) -> tuple[tuple[ToolSpec, ...], tuple[HostedTool, ...]]:
    """The request's `tools` as specs and hosted tools: a list seen before found by its text
    (`KnownList`: a body read in parts) or by its values (`ToolLists`)."""
    kind = type(raw)
    if kind is KnownList:
        return raw.value  # type: ignore[no-any-return]
    return _TOOL_LISTS.decoded(raw) if kind is list else _tools(raw)


def _tools(value: Any) -> tuple[tuple[ToolSpec, ...], tuple[HostedTool, ...]]:
    specs: list[ToolSpec] = []
    hosted: list[HostedTool] = []
    for t, tool in enumerate(array(value, "tools")):
        path = f"tools[{t}]"
        tool = obj(tool, path, True)
        for key, spec in tool.items():
            if key == "functionDeclarations":
                for d, declaration in enumerate(array(spec, f"{path}.{key}")):
                    specs.append(
                        _declaration(obj(declaration, f"{path}.{key}[{d}]", True), f"{path}.{key}[{d}]")
                    )
            elif key in BUILT_IN_TOOLS:
                hosted.append(HostedTool(GEMINI, key, {key: spec}, required=True))
            else:
                raise invalid(f"unknown tool {key!r}", f"{path}.{key}")
    return tuple(specs), tuple(hosted)


# the declarations' schemas are read and converted once per list (gateway/ingress/tool_lists.py)
_TOOL_LISTS = ToolLists(_tools)
# no typed reading of the contents (parsed by orjson), the tools found by their text
TYPED_TOOLS = TypedItems(None, 0, frozenset(), tools=_TOOL_LISTS)


def _declaration(declaration: dict[str, Any], path: str) -> ToolSpec:
    name = string(declaration.get("name"), f"{path}.name")
    description = declaration.get("description") or ""
    if "parametersJsonSchema" in declaration:
        parameters = json_schema(declaration["parametersJsonSchema"], f"{path}.parametersJsonSchema")
    elif declaration.get("parameters") is not None:
        parameters = json_schema(declaration["parameters"], f"{path}.parameters")
    else:
        parameters = {"type": "object", "properties": {}}
    return ToolSpec(name, string(description, f"{path}.description"), parameters)


def tool_choice(value: Any, has_tools: bool) -> ToolChoice | None:
    config = obj(obj(value, "toolConfig").get("functionCallingConfig"), "toolConfig.functionCallingConfig")
    if not config or not has_tools:
        return None
    path = "toolConfig.functionCallingConfig"
    mode = MODES.get(config.get("mode") or "AUTO")
    if mode is None:
        raise invalid(f"unknown mode {config.get('mode')!r}", f"{path}.mode")
    names = [
        string(n, f"{path}.allowedFunctionNames") for n in array(config.get("allowedFunctionNames"), path)
    ]
    if mode is ToolChoiceMode.REQUIRED and len(names) == 1:
        return ToolChoice(ToolChoiceMode.TOOL, names[0])
    if names and mode is ToolChoiceMode.REQUIRED:
        raise ClientError(
            400,
            f"{path}.allowedFunctionNames: only one allowed function name can be honoured on every provider",
            param=f"{path}.allowedFunctionNames",
            code="unsupported_parameter",
        )
    return ToolChoice(mode)
