"""Renders a scripted Reply as an OpenAI Responses API response object and its SSE event stream
(shapes as recorded in shared/fixtures/openai-responses)."""

from __future__ import annotations

import secrets
import string
import time
from dataclasses import replace
from typing import Any

import orjson

from gateway.simulators import structured
from gateway.simulators.base import Reply, SimulatorState, split_text, sse_frame
from gateway.simulators.responses_rules import encrypted_content

BASE62 = string.ascii_letters + string.digits
ENCRYPTED_INCLUDE = "reasoning.encrypted_content"
# call item type -> (its input field, the prefix of its delta/done events)
CALL_EVENTS = {
    "function_call": ("arguments", "response.function_call_arguments"),
    "custom_tool_call": ("input", "response.custom_tool_call_input"),
}


def _base62(n: int) -> str:
    return "".join(secrets.choice(BASE62) for _ in range(n))


def reasoning_requested(body: dict) -> bool:
    reasoning = body.get("reasoning")
    return isinstance(reasoning, dict) and reasoning.get("effort") != "none"


def response_shell(body: dict, response_id: str, created_at: int) -> dict:
    """The response object's fields that echo the request, without status/output/usage."""
    reasoning = body.get("reasoning") or {}
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": body["model"],
        "output": [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "prompt_cache_key": body.get("prompt_cache_key"),
        "prompt_cache_retention": body.get("prompt_cache_retention"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "safety_identifier": None,
        "service_tier": "default",
        "store": False,
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "top_logprobs": 0,
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": None,
        "user": None,
        "metadata": {},
    }


class Rendered:
    """One answer: the final response object plus what the stream needs beyond it."""

    __slots__ = ("preliminary_encrypted", "response", "shell", "summary")

    def __init__(self, response: dict, shell: dict, preliminary_encrypted: str | None, summary: str) -> None:
        self.response = response
        self.shell = shell
        self.preliminary_encrypted = preliminary_encrypted
        self.summary = summary


def _forced_tool(body: dict) -> tuple[str, Any] | None:
    """The function a forcing `tool_choice` makes the model call: `required`, or a named one."""
    tools = [
        (t["name"], t.get("parameters") or {})
        for t in body.get("tools") or ()
        if isinstance(t, dict) and t.get("type") == "function" and "name" in t
    ]
    choice = body.get("tool_choice")
    if choice == "required":
        return structured.pick_forced(tools, None)
    if isinstance(choice, dict) and choice.get("type") == "function":
        return structured.pick_forced(tools, choice.get("name"))
    return None


def _structured(body: dict, reply: Reply) -> Reply:
    """A `text.format` JSON request is answered with JSON valid for its schema (JSON mode: the
    schema its instructions spell out)."""
    reply = structured.forced_call(reply, _forced_tool(body))
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or reply.tool_calls or reply.refusal is not None:
        return reply
    if fmt.get("type") == "json_schema":
        return replace(reply, text=structured.answer_text(fmt["schema"], reply))
    if fmt.get("type") == "json_object":
        texts = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
        schema = structured.schema_in_instructions(texts)
        return replace(reply, text=structured.answer_text(schema, reply))
    return reply


SEARCH_RESULT_URL = "https://search.example/result"


def render(state: SimulatorState, body: dict, reply: Reply, raw_len: int) -> Rendered:
    model = body["model"]
    key = secrets.token_hex(20)  # every item id of this response shares it, like the API's ids
    shell = response_shell(body, f"resp_{key}", int(time.time()))
    truncated = reply.stop == "length"
    output: list[dict] = []
    preliminary = None
    summary_text = ""
    reasoning_chars = 0
    include = body.get("include") or ()
    reasoning = reasoning_requested(body)
    if reasoning:
        reasoning_id = f"rs_{key}"
        reasoning_chars = len(reply.reasoning)
        # summaries are only produced when the request asks for them
        if reply.reasoning and body["reasoning"].get("summary") is not None:
            summary_text = reply.reasoning
        summary = [summary_text] if summary_text else []
        item: dict[str, Any] = {"id": reasoning_id, "type": "reasoning"}
        if ENCRYPTED_INCLUDE in include:
            item["encrypted_content"] = encrypted_content(state, model, reasoning_id, summary)
            # output_item.added carries an earlier, incomplete token that must not be replayed
            preliminary = state.sign(model, reasoning_id, "in_progress")
        item["summary"] = [{"type": "summary_text", "text": text} for text in summary]
        output.append(item)
    reply = _structured(body, reply)
    notes: list[dict] = []
    hosted = any(t.get("type") in ("web_search", "web_search_preview") for t in body.get("tools") or ())
    if reply.web_search is not None and hosted:
        # https://platform.openai.com/docs/guides/tools-web-search ("Output and citations"): the
        # call's action names the query (its sources only when `include` asks for them), the
        # message's output_text cites what it used
        action: dict[str, Any] = {"type": "search", "query": reply.web_search}
        if "web_search_call.action.sources" in include:
            action["sources"] = [{"type": "url", "url": SEARCH_RESULT_URL}]
        output.append({"id": f"ws_{key}", "type": "web_search_call", "status": "completed", "action": action})
        notes.append(
            {
                "type": "url_citation",
                "url": SEARCH_RESULT_URL,
                "title": "Search result",
                "start_index": 0,
                "end_index": len(reply.text),
            }
        )
    if reply.refusal is not None:
        part: dict = {"type": "refusal", "refusal": reply.refusal}
    else:
        part = {"type": "output_text", "annotations": notes, "logprobs": [], "text": reply.text}
    if reply.text or reply.refusal is not None:
        output.append(
            {
                "id": f"msg_{key}",
                "type": "message",
                "status": "incomplete" if truncated else "completed",
                "content": [part],
                "role": "assistant",
            }
        )
    arguments_chars = 0
    custom = {t.get("name") for t in body.get("tools") or () if t.get("type") == "custom"}
    for n, call in enumerate(reply.tool_calls):
        if call.name in custom:
            # a custom tool takes free text: the scripted call's "input" argument
            prefix, field, arguments = "ctc", "input", str(call.arguments.get("input", ""))
        else:
            prefix, field, arguments = "fc", "arguments", orjson.dumps(call.arguments).decode()
        arguments_chars += len(arguments)
        output.append(
            {
                # calls made after reasoning are bound to its item: fc_<key>_<n> needs rs_<key>
                "id": f"{prefix}_{key}_{n}" if reasoning else f"{prefix}_{key}{n:02d}",
                "type": "custom_tool_call" if prefix == "ctc" else "function_call",
                "status": "completed",
                field: arguments,
                "call_id": "call_" + _base62(24),
                "name": call.name,
            }
        )
    input_tokens = max(1, raw_len // 4) + reply.cache_read
    reasoning_tokens = reasoning_chars // 4
    output_tokens = max(1, (reasoning_chars + len(reply.text) + arguments_chars) // 4)
    response = {
        **shell,
        "status": "incomplete" if truncated else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
        "output": output,
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": reply.cache_read},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": input_tokens + output_tokens,
        },
    }
    return Rendered(response, shell, preliminary, summary_text)


def _item_events(rendered: Rendered, index: int, item: dict, chunk_size: int) -> list[dict]:
    kind = item["type"]
    item_id = item["id"]
    ref = {"item_id": item_id, "output_index": index}
    if kind == "reasoning":
        added: dict[str, Any] = {"id": item_id, "type": "reasoning"}
        if rendered.preliminary_encrypted is not None:
            added["encrypted_content"] = rendered.preliminary_encrypted
        added["summary"] = []
        events: list[dict] = [{"type": "response.output_item.added", "output_index": index, "item": added}]
        if rendered.summary:
            part = {"type": "summary_text", "text": rendered.summary}
            summary_ref = {**ref, "summary_index": 0}
            events.append(
                {
                    "type": "response.reasoning_summary_part.added",
                    **summary_ref,
                    "part": {"type": "summary_text", "text": ""},
                }
            )
            events.extend(
                {"type": "response.reasoning_summary_text.delta", **summary_ref, "delta": delta}
                for delta in split_text(rendered.summary, chunk_size)
            )
            events.append(
                {"type": "response.reasoning_summary_text.done", **summary_ref, "text": rendered.summary}
            )
            events.append({"type": "response.reasoning_summary_part.done", **summary_ref, "part": part})
    elif kind == "message":
        part = item["content"][0]
        refused = part["type"] == "refusal"
        text = part["refusal"] if refused else part["text"]
        part_ref = {**ref, "content_index": 0}
        empty = {"type": "refusal", "refusal": ""} if refused else {**part, "text": "", "annotations": []}
        events = [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {
                    "id": item_id,
                    "type": "message",
                    "status": "in_progress",
                    "content": [],
                    "role": "assistant",
                },
            },
            {"type": "response.content_part.added", **part_ref, "part": empty},
        ]
        if refused:
            events.extend(
                {"type": "response.refusal.delta", **part_ref, "delta": delta}
                for delta in split_text(text, chunk_size)
            )
            events.append({"type": "response.refusal.done", **part_ref, "refusal": text})
        else:
            events.extend(
                {"type": "response.output_text.delta", **part_ref, "delta": delta, "logprobs": []}
                for delta in split_text(text, chunk_size)
            )
            events.extend(
                {
                    "type": "response.output_text.annotation.added",
                    **part_ref,
                    "annotation_index": n,
                    "annotation": a,
                }
                for n, a in enumerate(part.get("annotations") or ())
            )
            events.append({"type": "response.output_text.done", **part_ref, "text": text, "logprobs": []})
        events.append({"type": "response.content_part.done", **part_ref, "part": part})
    elif kind in CALL_EVENTS:
        field, prefix = CALL_EVENTS[kind]
        events = [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress", field: ""},
            }
        ]
        events.extend(
            {"type": f"{prefix}.delta", **ref, "delta": delta}
            for delta in split_text(item[field], chunk_size)
        )
        events.append({"type": f"{prefix}.done", **ref, field: item[field]})
    elif kind == "web_search_call":
        events = [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress"},
            },
            *(
                {"type": f"response.web_search_call.{step}", **ref}
                for step in ("in_progress", "searching", "completed")
            ),
        ]
    else:
        raise ValueError(f"cannot stream a {kind!r} output item")
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def stream_frames(rendered: Rendered, chunk_size: int) -> list[bytes]:
    response = rendered.response
    events: list[dict] = [
        {"type": "response.created", "response": rendered.shell},
        {"type": "response.in_progress", "response": rendered.shell},
    ]
    for index, item in enumerate(response["output"]):
        events.extend(_item_events(rendered, index, item, chunk_size))
    terminal = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    events.append({"type": terminal, "response": response})
    frames = []
    for sequence_number, event in enumerate(events):
        frames.append(
            sse_frame({"type": event["type"], "sequence_number": sequence_number, **event}, event["type"])
        )
    return frames


def failure_frames(shell: dict, sequence_number: int, kind: str, code: str | None, message: str) -> bytes:
    """The in-stream failure: an `error` event, then `response.failed` (openai-error.1.chunks.txt)."""
    error = {
        "type": "error",
        "sequence_number": sequence_number,
        "error": {"type": kind, "code": code, "message": message, "param": None},
    }
    failed = {
        "type": "response.failed",
        "sequence_number": sequence_number + 1,
        "response": {**shell, "status": "failed", "error": {"code": code, "message": message}},
    }
    return sse_frame(error, "error") + sse_frame(failed, "response.failed")
