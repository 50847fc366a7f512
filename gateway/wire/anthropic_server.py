"""Anthropic server-tool blocks and citations <-> canonical blocks.

Anthropic runs some tools itself (web search, web fetch, code execution): the answer holds a
`server_tool_use` block and a `<name>_tool_result` block whose content may be encrypted
(`encrypted_content`), and text blocks may carry `citations` (`web_search_result_location` with an
`encrypted_index`). Such history replays to Anthropic only as it was sent (docs: "Web search tool",
https://docs.claude.com/en/docs/agents-and-tools/tool-use/web-search-tool, "the
encrypted_content must be passed back in multi-turn conversations"); every other family reads the
readable fields kept beside it.

Continuity data written here (read back only by the anthropic modules):
  server_tool_use / *_tool_result -> meta.data={"block": the wire block}
  a citation                      -> meta.data={"citation": the wire citation}

The Messages dialect speaks the same wire, so it decodes what a client echoes with these too,
with an unknown issuer scope (ANY_ISSUER), like echoed thinking signatures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from gateway.transcript.model import Citation, Continuity, ServerToolCall, ServerToolResult, Source

SERVER_TOOL_USE = "server_tool_use"
RESULT_SUFFIX = "_tool_result"  # web_search_tool_result, web_fetch_tool_result, ...

Stamp = Callable[[Mapping[str, Any]], Continuity]


def is_server_result(kind: str) -> bool:
    return kind.endswith(RESULT_SUFFIX) and kind != "tool_result"


def server_call(block: Mapping[str, Any], stamp: Stamp, input_text: str | None = None) -> ServerToolCall:
    """`input_text`: the input as streamed (input_json_delta), else the block's own `input`."""
    if input_text is None:
        input_text = orjson.dumps(block.get("input") or {}).decode()
    return ServerToolCall(str(block["id"]), str(block["name"]), input_text, stamp({"block": dict(block)}))


def server_result(block: Mapping[str, Any], stamp: Stamp) -> ServerToolResult:
    kind = str(block["type"])
    name = kind[: -len(RESULT_SUFFIX)]
    content = block.get("content")
    sources: list[Source] = []
    texts: list[str] = []
    error = False
    for item in content if isinstance(content, list) else [content]:
        if not isinstance(item, Mapping):
            continue
        itype = str(item.get("type") or "")
        if itype.endswith("_error"):
            error = True
            texts.append(f"error: {item.get('error_code') or itype}")
        elif item.get("url"):
            sources.append(Source(str(item["url"]), str(item.get("title") or "")))
            document = item.get("content")
            if isinstance(document, Mapping):  # web_fetch_result: the page as a document block
                source = document.get("source")
                if isinstance(source, Mapping) and source.get("type") == "text":
                    texts.append(str(source.get("data") or ""))
        else:  # code execution and later tools: their readable output
            for key in ("stdout", "stderr", "text", "content"):
                value = item.get(key)
                if isinstance(value, str) and value:
                    texts.append(value)
    return ServerToolResult(
        str(block.get("tool_use_id") or ""),
        name,
        tuple(sources),
        "\n".join(texts),
        error,
        stamp({"block": dict(block)}),
    )


def citation(raw: Mapping[str, Any], stamp: Stamp) -> Citation:
    return Citation(
        str(raw.get("url") or ""),
        str(raw.get("title") or raw.get("document_title") or ""),
        str(raw.get("cited_text") or ""),
        stamp({"citation": dict(raw)}),
    )


def wire_block(meta: Continuity | None) -> dict[str, Any] | None:
    """The block as its issuer sent it, when `meta` holds one."""
    if meta is None or meta.kind != "anthropic":
        return None
    block = meta.data.get("block")
    return dict(block) if isinstance(block, Mapping) else None


def wire_citation(meta: Continuity | None) -> dict[str, Any] | None:
    if meta is None or meta.kind != "anthropic":
        return None
    raw = meta.data.get("citation")
    return dict(raw) if isinstance(raw, Mapping) else None


def server_call_wire(call: ServerToolCall) -> dict[str, Any]:
    """A server_tool_use block: the issuer's own, with the input as it was streamed."""
    block = wire_block(call.meta) or {"type": SERVER_TOOL_USE, "id": call.id, "name": call.name}
    try:
        value = orjson.loads(call.input) if call.input.strip() else {}
    except orjson.JSONDecodeError:
        value = {}
    block["input"] = value if isinstance(value, dict) else {}
    return block
