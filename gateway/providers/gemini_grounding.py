"""Gemini's grounding with Google Search as canonical server-tool blocks.

An answer grounded by the `google_search` tool carries `groundingMetadata` on its candidate
(https://ai.google.dev/gemini-api/docs/google-search, "Understanding the grounding response"):
`webSearchQueries` (what was searched), `groundingChunks` (`web.uri`, `web.title`: the sources)
and `groundingSupports` (a `segment` of the answer and the chunks that support it). It is
metadata of the response, not content a later request can carry back, so every family (Gemini
too) reads it as text: the queries, the sources and which part of the answer each supports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from gateway.transcript.model import Continuity, ServerToolCall, ServerToolResult, Source

NAME = "google_search"


def grounding_blocks(
    raw: Mapping[str, Any], stamp: Callable[[Mapping[str, Any]], Continuity], call_id: str
) -> tuple[ServerToolCall, ServerToolResult] | None:
    """The search as a call and its result; None when the metadata holds nothing readable."""
    queries = [q for q in raw.get("webSearchQueries") or () if isinstance(q, str)]
    sources: list[Source] = []
    for chunk in raw.get("groundingChunks") or ():
        web = chunk.get("web") if isinstance(chunk, Mapping) else None
        if isinstance(web, Mapping) and web.get("uri"):
            sources.append(Source(str(web["uri"]), str(web.get("title") or "")))
    cited: list[str] = []
    for support in raw.get("groundingSupports") or ():
        if not isinstance(support, Mapping):
            continue
        segment = support.get("segment") or {}
        indices = [i for i in support.get("groundingChunkIndices") or () if isinstance(i, int)]
        text = segment.get("text") if isinstance(segment, Mapping) else None
        if text and indices:
            cited.append(f'"{text}" [{", ".join(str(i + 1) for i in indices)}]')
    if not queries and not sources:
        return None
    meta = stamp({"grounding": dict(raw)})
    call = ServerToolCall(call_id, NAME, orjson.dumps({"queries": queries}).decode(), meta)
    text = "Cited: " + "; ".join(cited) if cited else ""
    return call, ServerToolResult(call_id, NAME, tuple(sources), text, False, meta)
