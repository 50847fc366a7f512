"""The Message JSON of a whole answer: the Anthropic stream events of its turn (encode.py's
`MessageEvents`), folded, so a whole answer and a stream always say the same.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from gateway.transcript.assembler import unfold
from gateway.transcript.model import AssistantTurn

if TYPE_CHECKING:
    from gateway.ingress.messages.encode import MessageEvents

log = logging.getLogger("gateway")


def message_json(events: MessageEvents, turn: AssistantTurn) -> dict[str, Any]:
    """The Message of a whole answer: the stream events of `turn`, folded."""
    stream: list[dict[str, Any]] = []
    for event in unfold(turn):
        stream += events.feed(event)
    stream += events.end()
    return fold(stream)


def fold(stream: list[dict[str, Any]]) -> dict[str, Any]:
    """Anthropic stream events -> the Message they describe."""
    message: dict[str, Any] = {}
    content: list[dict[str, Any]] = []
    arguments: dict[int, list[str]] = {}
    for event in stream:
        kind = event["type"]
        if kind == "content_block_delta":
            block, delta = content[event["index"]], event["delta"]
            dtype = delta["type"]
            if dtype == "text_delta":
                block["text"] += delta["text"]
            elif dtype == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif dtype == "signature_delta":
                block["signature"] = delta["signature"]
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])
            else:
                arguments.setdefault(event["index"], []).append(delta["partial_json"])
        elif kind == "content_block_start":
            content.append(dict(event["content_block"]))
        elif kind == "content_block_stop":
            index = event["index"]
            if content[index]["type"] in ("tool_use", "server_tool_use"):
                content[index]["input"] = _input("".join(arguments.pop(index, ())), content[index]["name"])
        elif kind == "message_start":
            message = dict(event["message"])
        elif kind == "message_delta":
            message.update(event["delta"])
            message["usage"] = event["usage"]
    message["content"] = content
    return message


def _input(arguments: str, name: str) -> dict[str, Any]:
    if not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value
    # an upstream that broke its own format: the call goes out with no input rather than a body
    # the client cannot parse (the streamed form carries the text as it came)
    log.warning("tool call %s: arguments are not a JSON object; answered with an empty input", name)
    return {}
