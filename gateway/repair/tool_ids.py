"""Project canonical tool-call ids to a target's id format at egress (DESIGN.md 4.2).

Deterministic and collision-free within one request; a call and its results get the same id. A
call that returns to the provider that issued it gets that provider's original id back.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace

from gateway.transcript.model import NATIVE_ID, Message, Role, ToolCall, ToolResult
from gateway.transcript.target import Target, ToolIdRule

_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _base62(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = []
    while n:
        n, r = divmod(n, 62)
        out.append(_ALPHABET[r])
    return "".join(out) or "0"


def _derive(canonical: str, rule: ToolIdRule, salt: int) -> str:
    digest = _base62(hashlib.sha256(f"{canonical}#{salt}".encode()).digest())
    if rule.style == "alnum9":
        return digest[:9]
    room = max(8, min(24, rule.max_len - len(rule.prefix)))
    return rule.prefix + digest[:room]


def project_tool_ids(
    messages: tuple[Message, ...], target: Target, rule: ToolIdRule
) -> tuple[tuple[Message, ...], dict[str, str], int]:
    """Returns the projected messages, the provider id -> canonical id map, and how many ids had
    to be rewritten into the target's format (an issuer getting its own ids back is no repair)."""
    pattern = re.compile(rule.pattern)
    forward: dict[str, str] = {}  # canonical -> provider
    used: set[str] = set()
    changed = 0
    call_index = 0

    def fits(candidate: str) -> bool:
        return (
            len(candidate) <= rule.max_len
            and pattern.fullmatch(candidate) is not None
            and candidate not in used
        )

    def assign(canonical: str, name: str | None, native: str | None) -> str:
        nonlocal call_index, changed
        if canonical in forward:
            return forward[canonical]
        index = call_index
        if name is not None:
            call_index += 1  # Kimi's index counts every call of the conversation
        if native and fits(native):
            pid = native
        else:
            if rule.style == "kimi" and name is not None and fits(f"functions.{name}:{index}"):
                pid = f"functions.{name}:{index}"
            elif rule.style != "kimi" and fits(canonical):
                pid = canonical
            else:
                salt = 0
                pid = _derive(canonical, rule, salt)
                while not fits(pid):
                    salt += 1
                    pid = _derive(canonical, rule, salt)
            if pid != canonical:
                changed += 1
        forward[canonical] = pid
        used.add(pid)
        return pid

    out: list[Message] = []
    for message in messages:
        if message.role is Role.USER:
            out.append(message)
            continue
        blocks = []
        for block in message.blocks:
            t = type(block)
            if t is ToolCall:
                native = block.meta.data.get(NATIVE_ID) if target.owns(block.meta) else None
                pid = assign(block.id, block.name, native if isinstance(native, str) else None)
                blocks.append(block if pid == block.id else replace(block, id=pid))
            elif t is ToolResult:
                pid = forward.get(block.call_id) or assign(block.call_id, None, None)
                blocks.append(block if pid == block.call_id else replace(block, call_id=pid))
            else:
                blocks.append(block)
        out.append(Message(message.role, tuple(blocks)))
    return tuple(out), {p: c for c, p in forward.items()}, changed
