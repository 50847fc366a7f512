"""What the simulators answer when run by hand (`python -m gateway.simulators`).

- tool-then-answer (the default): a request that offers tools gets a call of the first one, with
  arguments valid for its schema; the request that brings the result back gets a text answer.
  Without tools, a greeting. So any agent pointed at the gateway shows a full tool loop.
- `--script FILE`: the replies listed in a JSON or TOML file, in order, then tool-then-answer:

      [[reply]]                         # every simulator answers this first ...
      reasoning = "The user wants the weather: look it up."
      text = "Let me check."
      tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]

      [[reply]]
      provider = "anthropic"            # ... only this one answers this (a provider kind)
      fault = { status = 529 }          # an error instead of an answer: watch the failover

      [[reply]]
      text = "Paris is sunny."

  A JSON file holds the same object: {"reply": [{"text": "..."}, ...]}. Reply keys: text,
  reasoning, tool_calls (name, arguments), stop ("length"), chunk_size, redacted_reasoning,
  provider, fault (status, message, error_type, retry_after). Unknown keys are errors.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.simulators.base import KINDS, Fault, Reply, SimulatorHub, ToolCallSpec

_REPLY_KEYS = {
    "text",
    "reasoning",
    "tool_calls",
    "stop",
    "chunk_size",
    "redacted_reasoning",
    "provider",
    "fault",
}
_FAULT_KEYS = {"status", "message", "error_type", "retry_after"}
_STRING_SAMPLE = "example"


class ScriptError(ValueError):
    pass


def example_arguments(schema: Any) -> Any:
    """A value valid for a JSON schema (the subset tool schemas use): enums take their first
    value, objects get their required properties (all of them when none is marked required)."""
    if not isinstance(schema, dict):
        return {}
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return example_arguments(schema[key][0])
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    kind = str(kind).lower()  # Gemini's schema spells types in capitals
    if kind == "object":
        properties = schema.get("properties") or {}
        wanted = schema.get("required") or list(properties)
        return {name: example_arguments(properties.get(name, {})) for name in wanted}
    if kind == "array":
        count = schema.get("minItems", 0)
        return [example_arguments(schema.get("items", {})) for _ in range(count)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        return int(low) if kind == "integer" else low
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _STRING_SAMPLE


def tool_then_answer(kind: str) -> Callable[[Any], Reply]:
    """The default reply of one simulator: call the first offered tool, answer after its result."""
    from gateway.simulators.registry import TOOL_VIEWS  # late: registry imports every simulator

    offered_tools, after_tool_result = TOOL_VIEWS[kind]

    def reply(body: Any) -> Reply:
        tools = offered_tools(body) if isinstance(body, dict) else []
        if tools and not after_tool_result(body):
            name, schema = tools[0]
            return Reply(
                reasoning=f"The request offers the {name} tool; calling it first.",
                text=f"Let me call {name}.",
                tool_calls=[ToolCallSpec(name, example_arguments(schema))],
            )
        if tools:
            return Reply(reasoning="The tool answered.", text="Done: the tool's result is in.")
        return Reply(text=f"Hello from the {kind} simulator.", reasoning="Considering the request.")

    return reply


def _reply(entry: Any, where: str) -> tuple[str | None, Reply | Fault]:
    if not isinstance(entry, dict):
        raise ScriptError(f"{where}: must be a table/object")
    unknown = sorted(set(entry) - _REPLY_KEYS)
    if unknown:
        raise ScriptError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_REPLY_KEYS))})")
    provider = entry.get("provider")
    if provider is not None and provider not in KINDS:
        raise ScriptError(f"{where}.provider: {provider!r} is not a provider kind ({', '.join(KINDS)})")
    try:
        calls = [
            ToolCallSpec(str(call["name"]), dict(call.get("arguments") or {}))
            for call in entry.get("tool_calls") or ()
        ]
        reply = Reply(
            text=str(entry.get("text", "")),
            reasoning=str(entry.get("reasoning", "")),
            tool_calls=calls,
            redacted_reasoning=bool(entry.get("redacted_reasoning", False)),
            stop=entry.get("stop"),
            chunk_size=int(entry.get("chunk_size", 12)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ScriptError(f"{where}: {exc!r}") from None
    fault = entry.get("fault")
    if fault is None:
        return provider, reply
    if not isinstance(fault, dict) or set(fault) - _FAULT_KEYS or not isinstance(fault.get("status"), int):
        raise ScriptError(f"{where}.fault: needs an integer status; keys: {', '.join(sorted(_FAULT_KEYS))}")
    return provider, Fault(
        status=fault["status"],
        message=fault.get("message"),
        error_type=fault.get("error_type"),
        retry_after=fault.get("retry_after"),
    )


def load_script(path: str | Path) -> list[tuple[str | None, Reply | Fault]]:
    """The replies of a script file, each with the provider kind it is for (None: every one)."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode()) if path.suffix == ".toml" else json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ScriptError(f"{path}: {exc}") from None
    entries = data.get("reply") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ScriptError(f"{path}: expected a 'reply' list")
    return [_reply(entry, f"{path}: reply[{i}]") for i, entry in enumerate(entries)]


def install(hub: SimulatorHub, script: list[tuple[str | None, Reply | Fault]] = ()) -> None:
    """Every simulator of `hub` answers `script` first, then tool-then-answer."""
    for kind, state in hub.states.items():
        state.default_reply = tool_then_answer(kind)
        state.push(*(item for provider, item in script if provider in (None, kind)))
