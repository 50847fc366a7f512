"""Readable text for blocks a wire cannot carry natively: a server tool's call and result, and
citations. Used by repair (history for another family) and by ingress encoders (an answer for a
client whose dialect has no such block)."""

from __future__ import annotations

import orjson

from gateway.transcript.model import Citation, ServerToolCall, ServerToolResult


def call_text(call: ServerToolCall) -> str:
    try:
        value = orjson.loads(call.input) if call.input.strip() else {}
    except orjson.JSONDecodeError:
        value = call.input
    if isinstance(value, dict):
        asked = "; ".join(
            f"{k}: {v if isinstance(v, str) else orjson.dumps(v).decode()}" for k, v in value.items()
        )
    else:
        asked = str(value)
    return f"[{call.name} ({asked})]" if asked else f"[{call.name}]"


def result_text(result: ServerToolResult) -> str:
    lines = [f"[{result.name} {'failed' if result.is_error else 'results'}]"]
    lines.extend(f"- {s.title} <{s.url}>" if s.title else f"- <{s.url}>" for s in result.sources)
    if result.text:
        lines.append(result.text)
    return "\n".join(lines)


def citations_text(citations: tuple[Citation, ...]) -> str:
    lines = ["Sources:"]
    for c in citations:
        head = f"{c.title} <{c.url}>" if c.title and c.url else c.title or (f"<{c.url}>" if c.url else "")
        quote = f' "{c.cited_text}"' if c.cited_text else ""
        lines.append(f"- {head}{quote}".rstrip())
    return "\n".join(lines)
