"""Pure repair passes run for every outbound request, for the target the router picked.

No I/O, no clock, no randomness; they never mutate their input (failover re-runs them on the same
canonical transcript for the next target) and report what they changed."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gateway.repair.reasoning_policy import apply_reasoning_policy
from gateway.repair.report import Repair
from gateway.repair.tool_ids import project_tool_ids
from gateway.transcript.model import Request
from gateway.transcript.target import Capabilities, Target


@dataclass(frozen=True, slots=True)
class Prepared:
    request: Request  # repaired and projected for the target
    repairs: tuple[Repair, ...]
    provider_ids: dict[str, str]  # provider tool id -> canonical id, for mapping answers back


def prepare(request: Request, target: Target, caps: Capabilities, strict: bool = False) -> Prepared:
    """`strict`: the rejection-recovery mode (DESIGN.md 4.5): no replayed reasoning, thinking off."""
    messages, repairs = apply_reasoning_policy(request.messages, target, caps)
    messages, provider_ids, projected = project_tool_ids(messages, target, caps.tool_ids)
    repairs.extend(Repair("tool_id_projected") for _ in range(projected))
    return Prepared(replace(request, messages=messages), tuple(repairs), provider_ids)
