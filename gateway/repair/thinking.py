"""Anthropic's thinking switch (capabilities.signed_thinking_for_tool_loop), decided per request.

With thinking on, the assistant message that opened the current tool loop must start with a
thinking block the provider signed ("a final `assistant` message must start with a thinking
block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)"). A loop opened by
another provider, or whose thinking was dropped, has none, and a signature cannot be made up: the
request goes with thinking off instead (`thinking_disabled`): the repaired request's decision
(gateway/transcript/reasoning.py) says so, and the encoder renders it.

With thinking off, "an `assistant` message in the final position cannot contain `thinking`":
reasoning there is retired under the target's policy.
"""

from __future__ import annotations

from gateway.repair.reasoning_placement import retire_at
from gateway.repair.report import Repair
from gateway.transcript.model import Message, Reasoning, Request, Role, ToolChoice, ToolChoiceMode, ToolResult
from gateway.transcript.reasoning import Decision
from gateway.transcript.target import Capabilities, OutputMode, Target


def loop_opener(messages: tuple[Message, ...]) -> int | None:
    """Index of the assistant message that opened the tool loop the request ends in, if it ends
    in one (its last user-side turn carries tool results). Consecutive user and tool messages are
    one user turn on the wire, and the loop reaches back over every turn pair whose user side
    carries results, as the API counts it."""
    turns: list[tuple[bool, int, bool]] = []  # (assistant side, first message, carries results)
    for i, message in enumerate(messages):
        assistant = message.role is Role.ASSISTANT
        results = not assistant and any(type(b) is ToolResult for b in message.blocks)
        if turns and turns[-1][0] == assistant:
            side, first, had = turns[-1]
            turns[-1] = (side, first, had or results)
        else:
            turns.append((assistant, i, results))
    if len(turns) < 2 or turns[-1][0] or not turns[-1][2]:
        return None
    opener = len(turns) - 2
    while opener >= 2 and turns[opener - 1][2]:
        opener -= 2
    return turns[opener][1]


def _forced(choice: ToolChoice | None) -> bool:
    return choice is not None and choice.mode in (ToolChoiceMode.REQUIRED, ToolChoiceMode.TOOL)


def switch_thinking(
    messages: tuple[Message, ...],
    decision: Decision,
    request: Request,
    target: Target,
    caps: Capabilities,
    strict: bool,
) -> tuple[tuple[Message, ...], Decision, list[Repair]]:
    """(messages, decision, repairs) for `request` as repaired so far: its messages and the
    decision may already differ from the request's own."""
    if not caps.signed_thinking_for_tool_loop:
        return messages, decision, []
    repairs: list[Repair] = []
    if decision.reasoning.on:
        reason = None
        kind = "thinking_disabled"
        min_budget, max_tokens = caps.min_thinking_budget, request.max_tokens
        if strict:
            reason = "rejection recovery"
        elif caps.thinking_forbids_forced_tool_choice and request.tools and _forced(request.tool_choice):
            reason = "tool_choice forces a tool"
        elif caps.thinking_forbids_forced_tool_choice and decision.output is OutputMode.FORCED_TOOL:
            # the structured output goes through a forced tool, which the provider refuses to
            # combine with thinking
            reason, kind = "structured output through a forced tool", "thinking_off_for_forced_tool"
        elif min_budget is not None and max_tokens is not None and max_tokens <= min_budget:
            # the provider would go without thinking anyway; saying so keeps the rules below true
            reason = "max_tokens leaves no room for thinking"
        else:
            opener = loop_opener(messages)
            if opener is not None and type(messages[opener].blocks[0]) is not Reasoning:
                reason = "open tool loop without a signed thinking block"
        if reason is None:
            return messages, decision, repairs
        decision = decision.thinking_off("repair")
        repairs.append(Repair(kind, reason))
    if messages and messages[-1].role is Role.ASSISTANT:
        final = messages[-1]
        at = {n for n, b in enumerate(final.blocks) if type(b) is Reasoning}
        if at:
            blocks = retire_at(
                final.blocks, at, target, repairs, "thinking in the final message, thinking off"
            )
            kept = (Message(Role.ASSISTANT, blocks),) if blocks else ()
            messages = messages[:-1] + kept
    return messages, decision, repairs
