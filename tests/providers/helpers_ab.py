"""Test helpers for the anthropic and openai_responses adapter tests: rebuild SSE from recorded
chunk files, read VCR cassettes, feed decoders in slices."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.providers.base import StreamDecoder
from gateway.transcript.events import Event, StreamError


def chunk_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sse_body(lines: list[str], named: bool) -> bytes:
    """SSE framing for chunk-file lines: `event: <type>` (Anthropic) and `data: <line>`."""
    frames = []
    for line in lines:
        head = f"event: {orjson.loads(line)['type']}\n" if named else ""
        frames.append(f"{head}data: {line}\n\n")
    return "".join(frames).encode()


def feed(decoder: StreamDecoder, body: bytes, size: int | None = None) -> list[Event]:
    """All events of `body` fed whole, or in `size`-byte slices, then finish()."""
    events: list[Event] = []
    if size is None:
        events.extend(decoder.feed(body))
    else:
        for start in range(0, len(body), size):
            events.extend(decoder.feed(body[start : start + size]))
    events.extend(decoder.finish())
    return events


def cassette(path: Path) -> list[dict[str, Any]]:
    """The interactions of a VCR cassette. Their `parsed_body` mappings are general YAML, so
    this needs PyYAML (not a project dependency): skipped when it is not installed."""
    yaml = pytest.importorskip(
        "yaml", reason="PyYAML (not installed) is needed for cassette parsed_body YAML"
    )
    return yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"]


def cassette_sse_bodies(path: Path) -> list[str]:
    """Raw SSE bodies of a VCR cassette, read without a YAML library: each is a block literal
    (`string: |+`) whose lines are indented deeper than its key."""
    lines = path.read_text(encoding="utf-8").split("\n")
    bodies: list[str] = []
    for n, line in enumerate(lines):
        key = line.lstrip(" ")
        if not (key.startswith("string: |") and key.rstrip() in ("string: |", "string: |+", "string: |-")):
            continue
        key_indent = len(line) - len(key)
        content: list[str] = []
        indent = 0
        for raw in lines[n + 1 :]:
            stripped = raw.lstrip(" ")
            if stripped:
                depth = len(raw) - len(stripped)
                if depth <= key_indent:
                    break
                indent = indent or depth
            content.append(raw[indent:])
        bodies.append("".join(part + "\n" for part in content))  # `|+` keeps every line break
    return bodies


def sse_data_payloads(body: str) -> list[dict[str, Any]]:
    """Parsed `data:` payloads of a raw SSE body (for computing expectations)."""
    return [orjson.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


def stream_errors(events: list[Event]) -> list[StreamError]:
    return [e for e in events if type(e) is StreamError]
