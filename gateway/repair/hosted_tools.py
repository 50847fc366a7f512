"""Hosted tools (web search, file search... run by the provider itself) reach only targets of the
provider kind that hosts them. Elsewhere an optional one is left out, counted
`hosted_tool_dropped` (the detail names its type); a required one stays, and the target's encoder
refuses the request (another target may serve it)."""

from __future__ import annotations

from gateway.repair.report import Repair
from gateway.transcript.model import HostedTool
from gateway.transcript.target import Target


def drop_foreign_hosted_tools(
    hosted: tuple[HostedTool, ...], target: Target
) -> tuple[tuple[HostedTool, ...], list[Repair]]:
    if all(tool.kind == target.kind or tool.required for tool in hosted):
        return hosted, []
    kept = tuple(tool for tool in hosted if tool.kind == target.kind or tool.required)
    repairs = [
        Repair("hosted_tool_dropped", f"{tool.type} (hosted by {tool.kind})")
        for tool in hosted
        if tool.kind != target.kind and not tool.required
    ]
    return kept, repairs
