"""The one decision about a request's reasoning and output, per target (README "Reasoning").

`decide` resolves, once per request and target, what the model is asked to do about reasoning
(off; on with a token budget, an effort level, or the model's own sizing; the model's default)
and whether the client's answer carries it, from three inputs in a fixed precedence:

1. what the client asked explicitly (Messages `thinking` / `output_config.effort`, chat
   `reasoning_effort`, Responses `reasoning.effort`: canonical `Request.thinking`,
   `thinking_budget`, `reasoning_effort`);
2. what the target sets in config (`thinking_budget`, `reasoning_effort`): used when the client
   said nothing, and over the client's choice only with `pin_reasoning = true` (the answer says so
   in `X-Gateway-Reasoning`);
3. when neither says anything, the dialect's own default (`Request.thinking_default`: the
   Messages API means "off", chat and Responses mean "the model's default").

What the model can do (its family's `ThinkingRule`, data in the provider module) then fits the
choice: an effort it does not take becomes the nearest one it does, a budget is clamped to its
range, "off" on a model that cannot stop reasoning becomes its least reasoning, reasoning on a
model that cannot reason becomes off. Where that changes an explicit choice, the answer says so.
Encoders only render the result in their family's parameters; nothing downstream re-derives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from gateway.bounded_cache import BoundedCache
from gateway.transcript.decision import MODEL_DEFAULT, OFF_CHOICE, Decision, ReasoningChoice
from gateway.transcript.events import BlockDelta, BlockKind, BlockStart, BlockStop, Event
from gateway.transcript.model import Reasoning
from gateway.transcript.target import EFFORTS, OFF, ThinkingModel, ThinkingRule, output_mode

if TYPE_CHECKING:
    from gateway.transcript.model import Block, Request
    from gateway.transcript.target import Capabilities, Target


def client_choice(request: Request) -> ReasoningChoice | None:
    """What the client asked explicitly, unfitted; None when it said nothing."""
    if request.thinking is False or request.reasoning_effort == OFF:
        return OFF_CHOICE
    effort, budget = request.reasoning_effort, request.thinking_budget
    if request.thinking is True or effort is not None or budget is not None:
        return ReasoningChoice(True, effort, budget, adaptive=effort is None and budget is None)
    return None


def target_choice(target: Target) -> ReasoningChoice | None:
    """What the target's config sets, unfitted; None when it sets nothing."""
    if target.reasoning_effort == OFF:
        return OFF_CHOICE
    if target.thinking_budget is not None or target.reasoning_effort is not None:
        return ReasoningChoice(True, target.reasoning_effort, target.thinking_budget)
    return None


def _nearest(effort: str, offered: tuple[str, ...]) -> str:
    """The offered level closest to `effort` on the scale (ties go up)."""
    if effort in offered:
        return effort
    at = EFFORTS.index(effort) if effort in EFFORTS else EFFORTS.index("medium")
    return min(offered, key=lambda e: (abs(EFFORTS.index(e) - at), -EFFORTS.index(e)))


def _effort_for_budget(budget: int, budgets: Mapping[str, int]) -> str:
    """The effort whose budget is closest to `budget` (ties go up)."""
    return min(budgets, key=lambda e: (abs(budgets[e] - budget), -EFFORTS.index(e)))


def _least(model: ThinkingModel) -> ReasoningChoice:
    if model.efforts:
        return ReasoningChoice(True, effort=model.efforts[0])
    if model.budgets is not None:
        return ReasoningChoice(True, budget=model.budgets[0])
    return ReasoningChoice(True)


def fit(want: ReasoningChoice, model: ThinkingModel, rule: ThinkingRule) -> tuple[ReasoningChoice, bool]:
    """`want` as `model` can take it, and whether that changed what `want` asked for."""
    if want.default:
        return want, False
    if not model.reasons:
        return OFF_CHOICE, want.on
    if not want.on:
        return (OFF_CHOICE, False) if model.can_off else (_least(model), True)
    budgets = rule.effort_budgets
    if model.efforts:
        asked = want.effort
        if asked is None:
            asked = _effort_for_budget(want.budget, budgets) if want.budget is not None else "medium"
        effort = _nearest(asked, model.efforts)
        return ReasoningChoice(True, effort=effort), want.effort is not None and effort != want.effort
    if model.budgets is not None:
        if want.adaptive and model.adaptive:
            return ReasoningChoice(True, adaptive=True), False
        least, most = model.budgets
        asked_budget = want.budget
        if asked_budget is None:
            asked_budget = budgets.get(want.effort or "medium", least)
        budget = min(max(asked_budget, least), most)
        return ReasoningChoice(True, budget=budget), want.budget is not None and budget != want.budget
    return ReasoningChoice(True), False


# the decision for a request that asks nothing of reasoning or output (most requests): a function
# of the target and its capabilities alone, worked out once per target (found by identity: the
# entry holds both alive, so their ids name no other object meanwhile)
_UNASKED: BoundedCache[int, tuple[Target, Capabilities, Decision]] = BoundedCache(256)


def decide(request: Request, target: Target, caps: Capabilities) -> Decision:
    """The decision for `request` on `target` (the module docstring gives the precedence)."""
    if (
        request.thinking is None
        and request.reasoning_effort is None
        and request.thinking_budget is None
        and request.thinking_default is None
        and request.response_format is None
    ):
        found = _UNASKED.get(id(target))
        if found is not None and found[0] is target and found[1] is caps:
            return found[2]
        return _UNASKED.keep(id(target), (target, caps, _decide(request, target, caps)))[2]
    return _decide(request, target, caps)


def _decide(request: Request, target: Target, caps: Capabilities) -> Decision:
    asked = client_choice(request)
    configured = target_choice(target)
    by = None
    if asked is None:
        want = configured
        if want is None:
            want = (
                MODEL_DEFAULT
                if request.thinking_default is None
                else ReasoningChoice(request.thinking_default)
            )
    elif configured is not None and target.pin_reasoning and configured != asked:
        want, by = configured, "target"
    else:
        want = asked
    choice, changed = fit(want, caps.thinking.model(target.model), caps.thinking)
    if changed and asked is not None and by is None:
        by = "model"
    # the client sees reasoning unless it (or, when it said nothing, what stands in for it)
    # asked for none; a model that cannot stop reasoning still keeps its continuity in the store
    shown = (asked is None or asked.on) and (want.on or want.default)
    return Decision(
        choice,
        shown,
        output_mode(request, target.model, caps.structured_output),
        asked.label() if asked is not None else None,
        by,
    )


def decision_of(request: Request, target: Target, caps: Capabilities) -> Decision:
    """The decision repair carried on `request`; for a request that did not go through repair
    (an encoder called directly), the same function makes it."""
    return request.decision if request.decision is not None else decide(request, target, caps)


def setting_problem(
    rule: ThinkingRule, model: str, thinking_budget: int | None, reasoning_effort: str | None
) -> tuple[str, str] | None:
    """(config key, why) when a target's reasoning setting is one its model cannot honour."""
    entry = rule.model(model)
    key = "thinking_budget" if thinking_budget is not None else "reasoning_effort"
    if thinking_budget is None and reasoning_effort is None:
        return None
    if not entry.reasons:
        return key, f"{model} does not reason: it takes no {key}"
    if reasoning_effort == OFF and not entry.can_off:
        return "reasoning_effort", f"{model} cannot turn its reasoning off"
    if not entry.efforts and entry.budgets is None and reasoning_effort not in (None, OFF):
        return "reasoning_effort", f"{model} takes no reasoning effort, only thinking on or off"
    if thinking_budget is not None:
        if entry.budgets is None:
            return "thinking_budget", f"{model} takes no thinking budget (use reasoning_effort)"
        least, most = entry.budgets
        if not least <= thinking_budget <= most:
            return "thinking_budget", f"{model} takes a thinking budget of {least} to {most} tokens"
    if reasoning_effort not in (None, OFF) and entry.efforts and reasoning_effort not in entry.efforts:
        return "reasoning_effort", f"{model} takes the efforts {', '.join(entry.efforts)}"
    return None


def visible_blocks(blocks: list[Block], shown: bool) -> list[Block]:
    """An answer's blocks as the client gets them: no reasoning when it is not shown."""
    if shown:
        return blocks
    return [b for b in blocks if type(b) is not Reasoning]


class ReasoningFilter:
    """Which events of a streamed answer reach a client that does not see reasoning (the whole
    answer is still folded and recorded, continuity included)."""

    __slots__ = ("_hidden",)

    def __init__(self) -> None:
        self._hidden: set[int] = set()

    def passes(self, event: Event) -> bool:
        t = type(event)
        if t is BlockStart:
            if event.kind is BlockKind.REASONING:  # type: ignore[union-attr]
                self._hidden.add(event.index)  # type: ignore[union-attr]
                return False
            return True
        if t is BlockDelta or t is BlockStop:
            return event.index not in self._hidden  # type: ignore[union-attr]
        return True
