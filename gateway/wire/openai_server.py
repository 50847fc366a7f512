"""OpenAI Responses server-tool items and annotations <-> canonical blocks.

OpenAI runs web search and file search itself: the output holds a `web_search_call` item (its
`action`: a `search` with the `query` and, when included, the `sources`; an `open_page` or a
`find` with the `url`) or a `file_search_call` item (`queries`, and `results` when included), and
`output_text` parts carry `annotations` (`url_citation` with `url`, `title` and the span it cites;
`file_citation` with the `filename`). Such items replay to OpenAI as they were sent
(https://platform.openai.com/docs/guides/tools-web-search, "Output and citations"); every other
family reads the readable fields kept beside them.

One item is both the call and its result: the call carries the item (meta.data={"item": ...}) and
the result only points at it (meta.data={"paired": item id}), so the item goes out once.
Annotations: meta.data={"annotation": the wire annotation}. The Responses dialect decodes what a
client echoes with these too, with an unknown issuer scope (ANY_ISSUER).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from gateway.transcript.model import Citation, Continuity, ServerToolCall, ServerToolResult, Source

KIND = "openai_responses"
SERVER_ITEMS = frozenset({"web_search_call", "file_search_call"})

Stamp = Callable[[Mapping[str, Any]], Continuity]


def server_item(
    item: Mapping[str, Any], stamp: Stamp, fallback_id: str
) -> tuple[ServerToolCall, ServerToolResult]:
    """A web_search_call / file_search_call item as a call and its result."""
    kind = str(item["type"])
    item_id = item.get("id") if isinstance(item.get("id"), str) and item.get("id") else fallback_id
    name = kind.removesuffix("_call")
    sources: list[Source] = []
    texts: list[str] = []
    if kind == "web_search_call":
        action = item.get("action") if isinstance(item.get("action"), Mapping) else {}
        asked = {k: v for k, v in action.items() if k != "sources"}
        for source in action.get("sources") or ():
            if isinstance(source, Mapping) and source.get("url"):
                sources.append(Source(str(source["url"]), str(source.get("title") or "")))
        if action.get("type") in ("open_page", "find") and action.get("url"):
            sources.append(Source(str(action["url"])))
    else:
        asked = {"queries": item.get("queries") or []}
        for result in item.get("results") or ():
            if not isinstance(result, Mapping):
                continue
            sources.append(Source(str(result.get("filename") or result.get("file_id") or ""), ""))
            if isinstance(result.get("text"), str):
                texts.append(result["text"])
    failed = item.get("status") == "failed"
    call = ServerToolCall(item_id, name, orjson.dumps(asked).decode(), stamp({"item": dict(item)}))
    result = ServerToolResult(
        item_id, name, tuple(sources), "\n".join(texts), failed, stamp({"paired": item_id})
    )
    return call, result


def annotation(raw: Mapping[str, Any], text: str, stamp: Stamp) -> Citation:
    start, end = raw.get("start_index"), raw.get("end_index")
    cited = text[start:end] if isinstance(start, int) and isinstance(end, int) else ""
    title = raw.get("title") or raw.get("filename") or ""
    return Citation(str(raw.get("url") or ""), str(title), cited, stamp({"annotation": dict(raw)}))


def wire_item(meta: Continuity | None) -> dict[str, Any] | None:
    if meta is None or meta.kind != KIND:
        return None
    item = meta.data.get("item")
    return dict(item) if isinstance(item, Mapping) else None


def paired(meta: Continuity | None) -> bool:
    """A result whose item its call carries."""
    return meta is not None and meta.kind == KIND and "paired" in meta.data


def wire_annotation(meta: Continuity | None) -> dict[str, Any] | None:
    if meta is None or meta.kind != KIND:
        return None
    raw = meta.data.get("annotation")
    return dict(raw) if isinstance(raw, Mapping) else None
