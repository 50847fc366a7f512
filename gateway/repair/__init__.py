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

from collections.abc import Mapping
from types import MappingProxyType

from msgspec import Struct

from gateway.repair.cache_breakpoints import limit_cache_breakpoints
from gateway.repair.continuity_fill import fill_reasoning_content, fill_thought_signatures
from gateway.repair.custom_tools import custom_tools_as_functions
from gateway.repair.empty_text import drop_empty_text
from gateway.repair.empty_turn import drop_empty_turns
from gateway.repair.holds import Holds, holds
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
from gateway.transcript.model import Message, Request, Role, ToolKind, replace
from gateway.transcript.reasoning import Decision, decision_of
from gateway.transcript.target import Capabilities, Target

# Every round of step 3 that changes something retires reasoning or merges messages, both finite.
# The bound only turns a bug into an error instead of a hang.
_MAX_ROUNDS = 64


class Prepared(Struct, frozen=True):  # one a request: a Struct's init costs a fraction
    request: Request  # repaired and projected for the target
    repairs: tuple[Repair, ...]
    # provider tool id -> canonical id: the inspector's diff pairs the two transcripts' calls by it
    provider_ids: Mapping[str, str]
    # custom tools sent in function form: their calls in the answer map back to custom calls
    custom_tools: frozenset[str] = frozenset()

    @property
    def decision(self) -> Decision:
        """What was decided for this target: reasoning, whether the client sees it, the output
        mode (set on every prepared request)."""
        assert self.request.decision is not None
        return self.request.decision


# shared by every request without custom tools / projected tool ids (each request's own empty set
# and dict would be kept alive with its capture by the inspector: gateway/inspector)
_NO_CUSTOM_TOOLS: frozenset[str] = frozenset()
_NO_IDS: Mapping[str, str] = MappingProxyType({})


def prepare(
    request: Request, target: Target, caps: Capabilities, strict: bool = False, found: Holds | None = None
) -> Prepared:
    """`strict`: the rejection-recovery mode (DESIGN.md 4.5): no replayed reasoning, thinking off,
    Gemini placeholders on the first call of every step of the current turn. `found`: what the
    messages hold, when known (None: gathered here; `EVERYTHING` runs every pass)."""
    client = request.messages
    h = holds(client) if found is None else found
    repairs: list[Repair] = []
    tools, messages, custom = request.tools, client, _NO_CUSTOM_TOOLS
    if not caps.custom_tools and (h.custom_calls or any(t.kind is ToolKind.CUSTOM for t in tools)):
        tools, messages, custom, found_ = custom_tools_as_functions(tools, messages, caps)
        repairs.extend(found_)
    hosted = request.hosted_tools
    if hosted:
        hosted, found_ = drop_foreign_hosted_tools(hosted, target)
        repairs.extend(found_)
    # from here on a pass is skipped while the messages are the client's and hold nothing it acts
    # on: it would hand them back unchanged and report nothing (gateway/repair/holds.py)
    if messages is not client or h.blank:
        messages, found_ = drop_empty_turns(messages, caps)
        repairs.extend(found_)
    if messages is not client or h.server:
        messages, found_ = render_server_tools(messages, target, caps)
        repairs.extend(found_)
    if messages is not client or h.media:
        messages, found_ = place_media(messages, target, caps)
        repairs.extend(found_)
    # messages known to hold no blank text and no empty message (None: not known)
    clean = None if h.blank else client
    if messages is not client or h.reasoning or h.meta:
        policed = messages
        messages, found_ = apply_reasoning_policy(messages, target, caps, strict=strict)
        repairs.extend(found_)
        # dropping reasoning and foreign meta blanks no text, and a message it empties is dropped
        # (retiring reasoning as text may make blank text): clean messages stay clean
        if policed is clean and target.reasoning_policy != "as_text":
            clean = messages
    # first, so that an empty message between calls and results does not count as displacing them
    if _may_drop_empty_text(messages, clean, caps):
        messages = drop_empty_text(messages, caps)
    if messages is not client or h.calls:
        messages, found_ = unique_call_ids(messages)
        repairs.extend(found_)
    if messages is not client or h.calls or h.results:
        messages, found_ = pair_tool_results(messages)
        repairs.extend(found_)

    decision = decision_of(request, target, caps)  # made here, unless an earlier run made it
    for _ in range(_MAX_ROUNDS):
        before, before_decision = messages, decision
        if _may_drop_empty_text(messages, clean, caps):
            messages = drop_empty_text(messages, caps)
        messages, found_ = fix_role_order(messages, caps)
        repairs.extend(found_)
        if messages is not client or h.reasoning:
            messages, found_ = place_reasoning(messages, target, caps)
            repairs.extend(found_)
        messages, decision, found_ = switch_thinking(messages, decision, request, target, caps, strict)
        repairs.extend(found_)
        if messages is before and decision == before_decision:
            break
    else:  # pragma: no cover - see _MAX_ROUNDS
        raise RuntimeError("repair did not reach a fixed point")

    if messages is not client or h.calls:
        messages, found_ = fill_thought_signatures(messages, target, caps)
        repairs.extend(found_)
        messages, found_ = fill_reasoning_content(messages, target, caps)
        repairs.extend(found_)
    provider_ids: Mapping[str, str] = _NO_IDS
    if messages is not client or h.calls or h.results:
        messages, provider_ids, projected = project_tool_ids(messages, target, caps.tool_ids)
        repairs.extend(Repair("tool_id_projected") for _ in range(projected))
    system = request.system
    if caps.max_cache_breakpoints is not None and (
        messages is not client
        or h.cached
        or any(t.cache is not None for t in tools)
        or any(b.cache is not None for b in system)
    ):
        tools, system, messages, found_ = limit_cache_breakpoints(tools, system, messages, caps)
        repairs.extend(found_)
    options = request.provider_options
    if options:
        options, found_ = options_for_target(options, target, caps)
        repairs.extend(found_)

    if (
        messages is client
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


def _may_drop_empty_text(
    messages: tuple[Message, ...], clean: tuple[Message, ...] | None, caps: Capabilities
) -> bool:
    """Whether `drop_empty_text` can change `messages` (`clean`: messages known to hold no blank
    text and no empty message): besides blank text and empty messages, a final assistant
    message's trailing whitespace where the target refuses it."""
    return messages is not clean or (
        caps.blank_text_forbidden and bool(messages) and messages[-1].role is Role.ASSISTANT
    )
