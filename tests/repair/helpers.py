"""Small builders for the repair unit tests."""

from __future__ import annotations

from gateway.transcript.model import Block, Message, Role, Text, ToolCall, ToolResult


def user(*blocks: Block | str) -> Message:
    return Message(Role.USER, tuple(Text(b) if isinstance(b, str) else b for b in blocks))


def assistant(*blocks: Block | str) -> Message:
    return Message(Role.ASSISTANT, tuple(Text(b) if isinstance(b, str) else b for b in blocks))


def tool(*results: ToolResult) -> Message:
    return Message(Role.TOOL, results)


def call(call_id: str, name: str = "f") -> ToolCall:
    return ToolCall(call_id, name, "{}")


def result(call_id: str, content: str = "ok") -> ToolResult:
    return ToolResult(call_id, content)


def kinds(repairs) -> list[str]:
    return sorted(r.kind for r in repairs)
