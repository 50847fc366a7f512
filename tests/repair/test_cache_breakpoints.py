"""Prompt-cache breakpoints: at most the provider's limit, the last ones kept, each removed one
counted; providers that cache implicitly are left alone."""

from __future__ import annotations

from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.repair.cache_breakpoints import limit_cache_breakpoints
from gateway.transcript.model import (
    CacheControl,
    Message,
    Request,
    Role,
    Text,
    ToolSpec,
)
from gateway.transcript.target import Target

C = CacheControl()
H = CacheControl("1h")
ANTHROPIC = get_adapter("anthropic").capabilities
CLAUDE = Target("claude", "anthropic", "claude-sonnet-4-5", "http://x")


def request(n_user_breakpoints: int) -> Request:
    users = tuple(
        Message(Role.USER if i % 2 == 0 else Role.ASSISTANT, (Text(f"m{i}", cache=C),))
        for i in range(n_user_breakpoints)
    )
    return Request(
        "g",
        users,
        system=(Text("rules", cache=H), Text("more")),
        tools=(ToolSpec("a", cache=C), ToolSpec("b")),
    )


def cached(req_tools, system, messages) -> list[str]:
    out = [f"tool:{t.name}" for t in req_tools if t.cache]
    out += [f"system:{b.text}" for b in system if b.cache]
    out += [b.text for m in messages for b in m.blocks if getattr(b, "cache", None)]
    return out


def test_within_the_limit_nothing_changes():
    req = request(2)
    tools, system, messages, repairs = limit_cache_breakpoints(req.tools, req.system, req.messages, ANTHROPIC)
    assert (tools, system, messages, repairs) == (req.tools, req.system, req.messages, [])


def test_the_earliest_breakpoints_go_first_and_are_counted():
    req = request(5)  # 1 tool + 1 system + 5 messages = 7
    tools, system, messages, repairs = limit_cache_breakpoints(req.tools, req.system, req.messages, ANTHROPIC)
    assert [r.kind for r in repairs] == ["cache_breakpoint_dropped"] * 3
    assert cached(tools, system, messages) == ["m1", "m2", "m3", "m4"]
    assert [b.text for m in messages for b in m.blocks] == ["m0", "m1", "m2", "m3", "m4"]  # content kept


def test_prepare_applies_the_limit_for_anthropic_only_and_keeps_the_ttl():
    req = request(3)  # 5 breakpoints
    prepared = prepare(req, CLAUDE, ANTHROPIC)
    assert [r.kind for r in prepared.repairs].count("cache_breakpoint_dropped") == 1
    assert prepared.request.system[0].cache == H  # the tool's went first
    assert prepared.request.tools[0].cache is None
    chat = Target("c", "openai_chat", "gpt-4.1", "http://y")
    assert prepare(req, chat, get_adapter("openai_chat").capabilities).repairs == ()
