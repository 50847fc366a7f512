"""Pure repair passes run for every outbound request, for the target the router picked.

No I/O, no clock, no randomness; they never mutate their input (failover re-runs them on the same
canonical transcript for the next target) and report what they changed. Each pass returns its
input object when it changed nothing, so a transcript that is already valid costs one scan per
pass and comes back equal.

Order matters:
0. tools the target cannot take: custom tools in function form, foreign hosted tools left out;
   assistant turns the client sent empty dropped where the target refuses them (counted);
   server-tool history and citations of another issuer as text; images and documents placed
   where the target's family takes them (placeholders for what it cannot read);
1. reasoning policy: only the target's own continuity stays (strict: none at all);
2. empty text removed, duplicate call ids renamed, then pairing and placement of results;
3. to a fixed point, because each step can create work for another: empty text removed, role
   order fixed (merges, inserted messages), reasoning placed where the target takes it, and the
   Anthropic thinking switch (on the decision made first: gateway/transcript/reasoning.py) -
   retiring misplaced reasoning can empty a message, which can leave two assistant messages
   next to each other, whose merge can misplace reasoning again;
4. continuity the target requires filled in (Gemini placeholders, DeepSeek/Kimi reasoning_content);
5. tool ids projected to the target's format;
6. prompt-cache breakpoints beyond the provider's limit removed, earliest first;
7. options only another provider kind understands left out (counted).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gateway.repair.cache_breakpoints import limit_cache_breakpoints
from gateway.repair.continuity_fill import fill_reasoning_content, fill_thought_signatures
from gateway.repair.custom_tools import custom_tools_as_functions
from gateway.repair.empty_text import drop_empty_text
from gateway.repair.empty_turn import drop_empty_turns
from gateway.repair.hosted_tools import drop_foreign_hosted_tools
from gateway.repair.media import place_media
from gateway.repair.provider_options import options_for_target
from gateway.repair.reasoning_placement import place_reasoning
from gateway.repair.reasoning_policy import apply_reasoning_policy
from gateway.repair.report import Repair
from gateway.repair.role_order import fix_role_order
from gateway.repair.server_tools import render_server_tools
from gateway.repair.thinking import switch_thinking
from gateway.repair.tool_ids import project_tool_ids
from gateway.repair.tool_pairing import pair_tool_results, unique_call_ids
from gateway.transcript.model import Request
from gateway.transcript.reasoning import Decision, decision_of
from gateway.transcript.target import Capabilities, Target

# Every round of step 3 that changes something retires reasoning or merges messages, both finite.
# The bound only turns a bug into an error instead of a hang.
_MAX_ROUNDS = 64


@dataclass(frozen=True, slots=True)
class Prepared:
    request: Request  # repaired and projected for the target
    repairs: tuple[Repair, ...]
    # provider tool id -> canonical id: the inspector's diff pairs the two transcripts' calls by it
    provider_ids: dict[str, str]
    # custom tools sent in function form: their calls in the answer map back to custom calls
    custom_tools: frozenset[str] = frozenset()

    @property
    def decision(self) -> Decision:
        """What was decided for this target: reasoning, whether the client sees it, the output
        mode (set on every prepared request)."""
        assert self.request.decision is not None
        return self.request.decision


def prepare(request: Request, target: Target, caps: Capabilities, strict: bool = False) -> Prepared:
    """`strict`: the rejection-recovery mode (DESIGN.md 4.5): no replayed reasoning, thinking off,
    Gemini placeholders on the first call of every step of the current turn."""
    tools, messages, custom, repairs = custom_tools_as_functions(request.tools, request.messages, caps)
    hosted, dropped = drop_foreign_hosted_tools(request.hosted_tools, target)
    repairs.extend(dropped)
    messages, found = drop_empty_turns(messages, caps)
    repairs.extend(found)
    messages, found = render_server_tools(messages, target, caps)
    repairs.extend(found)
    messages, found = place_media(messages, target, caps)
    repairs.extend(found)
    messages, found = apply_reasoning_policy(messages, target, caps, strict=strict)
    repairs.extend(found)
    # first, so that an empty message between calls and results does not count as displacing them
    messages = drop_empty_text(messages, caps)
    messages, renamed = unique_call_ids(messages)
    repairs.extend(renamed)
    messages, paired = pair_tool_results(messages)
    repairs.extend(paired)

    decision = decision_of(request, target, caps)  # made here, unless an earlier run made it
    for _ in range(_MAX_ROUNDS):
        before, before_decision = messages, decision
        messages = drop_empty_text(messages, caps)
        messages, found = fix_role_order(messages, caps)
        repairs.extend(found)
        messages, found = place_reasoning(messages, target, caps)
        repairs.extend(found)
        messages, decision, found = switch_thinking(messages, decision, request, target, caps, strict)
        repairs.extend(found)
        if messages is before and decision == before_decision:
            break
    else:  # pragma: no cover - see _MAX_ROUNDS
        raise RuntimeError("repair did not reach a fixed point")

    messages, found = fill_thought_signatures(messages, target, caps)
    repairs.extend(found)
    messages, found = fill_reasoning_content(messages, target, caps)
    repairs.extend(found)
    messages, provider_ids, projected = project_tool_ids(messages, target, caps.tool_ids)
    repairs.extend(Repair("tool_id_projected") for _ in range(projected))
    tools, system, messages, found = limit_cache_breakpoints(tools, request.system, messages, caps)
    repairs.extend(found)
    options, found = options_for_target(request.provider_options, target, caps)
    repairs.extend(found)

    if (
        messages is request.messages
        and decision == request.decision
        and tools is request.tools
        and system is request.system
        and hosted is request.hosted_tools
        and options is request.provider_options
    ):
        repaired = request  # every pass hands back its input when it changed nothing
    else:
        repaired = replace(
            request,
            messages=messages,
            decision=decision,
            tools=tools,
            system=system,
            hosted_tools=hosted,
            provider_options=options,
        )
    return Prepared(repaired, tuple(repairs), provider_ids, custom)
