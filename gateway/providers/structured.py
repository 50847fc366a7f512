"""Structured output helpers shared by the provider encoders and decoders (no provider branches:
each module decides from its capabilities which of these it uses)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.transcript.model import Request, ResponseFormat

_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")
ANY_OBJECT: Mapping[str, Any] = {"type": "object"}


def output_tool_name(request: Request) -> str:
    """The name of the tool whose input is the answer (FORCED_TOOL): the format's own name,
    made unique among the client's tools. Encoder and decoder derive it from the same request."""
    fmt = request.response_format
    base = _TOOL_NAME.sub("_", fmt.name if fmt is not None and fmt.name else "response")[:56] or "response"
    taken = {t.name for t in request.tools}
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def output_tool_description(fmt: ResponseFormat) -> str:
    return fmt.description or "Give the final answer: the input of this tool is the answer, as JSON."


def output_schema(fmt: ResponseFormat) -> Mapping[str, Any]:
    return fmt.schema if fmt.schema is not None else ANY_OBJECT


def schema_instructions(fmt: ResponseFormat) -> str:
    """What a JSON-mode provider is told when the client asked for a schema: the schema itself,
    rendered the same way for every request so the prompt prefix stays byte-stable."""
    schema = orjson.dumps(fmt.schema).decode()
    about = f" ({fmt.description})" if fmt.description else ""
    return (
        f"Answer with a single JSON object named {fmt.name}{about} and nothing else. "
        f"It must be valid against this JSON schema:\n```json\n{schema}\n```"
    )
