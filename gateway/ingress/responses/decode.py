"""Decode an OpenAI Responses request (`POST /v1/responses`) into the canonical Request."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.ingress.base import HistoryRef, ItemRef, SessionHint
from gateway.ingress.budget import KnownList
from gateway.ingress.errors import invalid
from gateway.ingress.memo_items import Items as Found
from gateway.ingress.responses.fields import (
    array,
    choice,
    flag,
    integer,
    number,
    obj,
    optional_text,
    text,
)
from gateway.ingress.responses.items import read_items
from gateway.ingress.responses.output import Answering
from gateway.ingress.responses.tools import Tools, listed, tool_choice, with_listed
from gateway.ingress.tool_lists import ToolLists
from gateway.ingress.typed_items import TypedItems
from gateway.session import valid_session_id
from gateway.transcript.model import REASONING_EFFORTS, Message, Request, ResponseFormat, Role, Text
from gateway.transcript.seal import Sealer

ENCRYPTED_INCLUDE = "reasoning.encrypted_content"
SUMMARIES = ("auto", "concise", "detailed")
# session keys a client names, in order of preference: the gateway's own header, Codex's
SESSION_HEADERS = ("X-Session-Id", "session-id")

# the instruction a compaction request ends with (the routed model writes the summary)
COMPACTION_PROMPT = (
    "The conversation above is about to be compacted: write the summary that replaces it. Another "
    "model will continue the work from your summary alone, with the same tools. Cover the user's "
    "goal and every requirement or constraint they stated, the decisions made and why, what was "
    "done (files changed, commands run and their results), what is still open, and the next "
    "steps. Keep names, paths, identifiers and numbers exact. Write the summary only."
)

# Parameters the gateway cannot honour on every provider: refused by name, never ignored.
_REFUSED = {
    "background": "background responses are not supported: the gateway answers while connected",
    "conversation": "conversations are not supported: send the transcript, or previous_response_id",
    "prompt": "stored prompt templates are not supported: send instructions and input",
}


@dataclass(frozen=True, slots=True)
class Decoded:
    request: Request
    answering: Answering
    session: SessionHint | None
    history: HistoryRef | None
    keep: bool
    ignored_tokens: int
    references: tuple[ItemRef, ...] = ()


def _listed(raw: list[Any]) -> tuple[Tools | None, list[Any]]:
    """`listed`, kept with the list it was read from: a list found by its text stands unparsed in
    the body (`KnownList`), and the Response object echoes the request's `tools` as they were
    parsed (`_shell`; the same JSON values give the same echo, written by orjson)."""
    return listed(raw), raw


_TOOL_LISTS = ToolLists(_listed)
# no typed reading of the input items (parsed by orjson), the tools found by their text
TYPED_TOOLS = TypedItems(None, 0, frozenset(), tools=_TOOL_LISTS)


def decode_request(
    body: Any,
    headers: Mapping[str, str],
    sealer: Sealer,
    compact: bool = False,
    found: Found[Any] | None = None,
) -> Decoded:
    """`compact`: the body came to /v1/responses/compact (answered with a compaction item).
    `found`: what the decode memo found of the `input` items (within an exchange)."""
    body = obj(body, "")
    for name, message in _REFUSED.items():
        if body.get(name) not in (None, False):
            raise invalid(message, param=name, code="unsupported_parameter")
    if (integer(body, "top_logprobs", 0) or 0) > 0:
        raise invalid(
            "log probabilities are not supported", param="top_logprobs", code="unsupported_parameter"
        )
    model = text(body, "model", "", empty=False)
    stream = bool(flag(body, "stream")) and not compact

    tools = Tools()
    raw_tools = body.get("tools") or []
    # the same `tools` every turn: added and finished once (gateway/ingress/tool_lists.py)
    alone = None
    kind = type(raw_tools)
    if kind is KnownList:  # found by its text (a body read in parts), finished alone or not
        alone, raw_tools = raw_tools.value
    elif kind is list and not compact:
        alone, raw_tools = _TOOL_LISTS.decoded(raw_tools)
    if compact:  # the request's tools are not the compaction's: only echoed
        alone = None
    elif alone is None:
        for n, tool in enumerate(array(raw_tools, "tools")):
            tools.add(tool, f"tools[{n}]")
    previous = optional_text(body, "previous_response_id", "")
    if body.get("input") is None and previous is None:
        raise invalid("is required", param="input", code="missing_required_parameter")
    raw_input = body.get("input")
    items = read_items(raw_input or [], sealer, tools, found if type(raw_input) is list else None, body)
    if alone is not None and not tools.added():
        tools = alone  # finished when first seen; the items added nothing to it
    else:
        if alone is not None:  # the items added tools: all of them finished together
            tools = with_listed(raw_tools, tools)
        tools.finish()
    choice_ = None if compact else tool_choice(body.get("tool_choice"), tools)

    system: list[Text] = []
    instructions = optional_text(body, "instructions", "")
    if instructions:
        system.append(Text(instructions))
    system.extend(items.system)
    messages = items.messages
    compaction = compact or items.compaction_trigger
    if compaction:
        messages = [*messages, Message(Role.USER, (Text(COMPACTION_PROMPT),))]

    reasoning = obj(body.get("reasoning") or {}, "reasoning")
    effort = choice(reasoning, "effort", "reasoning", REASONING_EFFORTS)
    summary = choice(reasoning, "summary", "reasoning", SUMMARIES) or choice(
        reasoning, "generate_summary", "reasoning", SUMMARIES
    )
    include = [
        text({"v": v}, "v", f"include[{n}]")
        for n, v in enumerate(array(body.get("include") or [], "include"))
    ]
    cache_key = optional_text(body, "prompt_cache_key", "")
    store = flag(body, "store")

    request = Request(
        model=model,
        messages=tuple(messages),
        system=tuple(system),
        tools=() if compaction else tuple(tools.specs),
        tool_choice=None if compaction else choice_,
        parallel_tool_calls=None if compaction else flag(body, "parallel_tool_calls"),
        stream=stream,
        max_tokens=integer(body, "max_output_tokens", 1),
        temperature=number(body, "temperature", 0, 2),
        top_p=number(body, "top_p", 0, 1),
        reasoning_effort=effort,
        reasoning_summary=summary,
        response_format=_response_format(body.get("text")),
        hosted_tools=() if compaction else tuple(tools.hosted),
        cache_key=cache_key,
    )
    answering = Answering(
        shell=_shell(body, model, store, instructions, raw_tools),
        names=tools.names,
        summaries=summary is not None,
        encrypted=ENCRYPTED_INCLUDE in include,
        compaction=compaction,
    )
    return Decoded(
        request,
        answering,
        _session(headers, cache_key),
        HistoryRef("previous_response_id", previous, "previous_response_not_found") if previous else None,
        keep=store is not False and not compaction,
        ignored_tokens=items.ignored_tokens,
        references=tuple(items.references),
    )


def _session(headers: Mapping[str, str], cache_key: str | None) -> SessionHint | None:
    for header in SESSION_HEADERS:
        value = headers.get(header)
        if value:
            return SessionHint(header, value)
    if cache_key:
        # a cache key names the conversation too; any string is a valid key, so one that is not
        # a valid session id is hashed into one
        value = (
            cache_key
            if valid_session_id(cache_key)
            else "pck_" + hashlib.sha256(cache_key.encode()).hexdigest()[:32]
        )
        return SessionHint("prompt_cache_key", value)
    return None


def _response_format(raw: Any) -> ResponseFormat | None:
    if raw is None:
        return None
    fmt = obj(raw, "text").get("format")
    if fmt is None:
        return None
    fmt = obj(fmt, "text.format")
    kind = text(fmt, "type", "text.format")
    if kind == "text":
        return None
    if kind == "json_object":
        return ResponseFormat("json_object")
    if kind == "json_schema":
        schema = obj(fmt.get("schema"), "text.format.schema")
        return ResponseFormat(
            "json_schema",
            name=optional_text(fmt, "name", "text.format") or "response",
            schema=schema,
            strict=flag(fmt, "strict", "text.format"),
            description=optional_text(fmt, "description", "text.format") or "",
        )
    raise invalid(
        "must be 'text', 'json_object' or 'json_schema'", param="text.format.type", code="invalid_value"
    )


def _shell(
    body: dict[str, Any], model: str, store: bool | None, instructions: str | None, tools: Any
) -> dict[str, Any]:
    """The request's fields every Response object echoes, as the API echoes them (`tools`: the
    request's, parsed)."""
    reasoning = body.get("reasoning") or {}
    text_config = body.get("text") or {}
    return {
        "model": model,
        "instructions": instructions,
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": body.get("max_tool_calls"),
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "safety_identifier": body.get("safety_identifier"),
        "service_tier": "default",
        "store": store is not False,
        "temperature": body.get("temperature", 1.0),
        "text": {
            "format": text_config.get("format") or {"type": "text"},
            "verbosity": text_config.get("verbosity", "medium"),
        },
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": tools,
        "top_logprobs": 0,
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation") or "disabled",
        "user": body.get("user"),
        "background": False,
    }
