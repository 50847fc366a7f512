"""What only some provider kinds understand: options keyed by kind (`Request.provider_options`)
and tools a provider hosts (`Request.hosted_tools`).

A target keeps its own kind's options (and, of the `betas` a client passed, only those its
capabilities list) and its own kind's hosted tools. Everything else is left out for it, counted
(`provider_option_dropped`, `hosted_tool_dropped`), except a hosted tool the client *requires*: it
stays, and the target's encoder refuses the request by the tool's name, so routing moves on to a
target that runs it (or the client hears which tool no target could run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.repair.report import Repair
from gateway.transcript.model import HostedTool, Request
from gateway.transcript.target import Capabilities, Target

BETAS = "betas"


def options_for_target(
    request: Request, target: Target, caps: Capabilities
) -> tuple[Mapping[str, Mapping[str, Any]], tuple[HostedTool, ...], list[Repair]]:
    repairs: list[Repair] = []
    options = request.provider_options
    kept: dict[str, Mapping[str, Any]] = {}
    for kind, values in options.items():
        if kind != target.kind:
            repairs.extend(Repair("provider_option_dropped", f"{kind}.{name}") for name in values)
            continue
        betas = values.get(BETAS)
        if betas is None:
            kept[kind] = values
            continue
        usable = tuple(b for b in betas if b in caps.client_betas)
        dropped = (b for b in betas if b not in usable)
        repairs.extend(Repair("provider_option_dropped", f"{kind}.beta {b}") for b in dropped)
        own = {k: v for k, v in values.items() if k != BETAS}
        if usable:
            own[BETAS] = usable
        kept[kind] = own
    hosted = tuple(t for t in request.hosted_tools if t.kind == target.kind or t.required)
    repairs.extend(
        Repair("hosted_tool_dropped", f"{t.kind}.{t.type}") for t in request.hosted_tools if t not in hosted
    )
    if not repairs:
        return options, request.hosted_tools, repairs
    return kept, hosted, repairs
