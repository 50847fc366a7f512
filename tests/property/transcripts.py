"""Hypothesis strategies: arbitrary canonical transcripts for one target, with continuity tokens
from every kind of issuer.

The target's own tokens are minted VALIDLY with the simulators' signing helpers, bound to the
target's model, exactly as the provider would have issued them; foreign ones are garbage, or real
tokens of the same provider kind for another model or another provider entry (scope). Around
them: interleaved text, calls with missing, orphan, duplicate and misplaced results, user messages
in between, duplicated and deleted messages (compaction), reused call ids, images and tool specs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from hypothesis import strategies as st

from gateway.providers import KINDS, get_adapter  # KINDS: every registered family
from gateway.providers.gemini.request import SIGNATURE
from gateway.repair.tool_pairing import synthetic_result
from gateway.simulators.anthropic_rules import redacted_data, thinking_signature
from gateway.simulators.base import SimulatorState
from gateway.simulators.gemini_render import call_covers, text_covers
from gateway.simulators.responses_rules import encrypted_content
from gateway.transcript.model import (
    ANY_ISSUER,
    NATIVE_ID,
    REASONING_EFFORTS,
    Block,
    Continuity,
    Image,
    Message,
    Reasoning,
    Request,
    Role,
    Text,
    ToolCall,
    ToolChoice,
    ToolChoiceMode,
    ToolResult,
    ToolSpec,
)
from gateway.transcript.target import Target

MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai_responses": "gpt-5",
    "openai_chat": "gpt-4.1",
    "gemini": "gemini-3-pro-preview",
    "mistral": "magistral-medium-latest",
    "kimi": "kimi-k2-thinking",
    "deepseek": "deepseek-reasoner",
}
# further upstream models a target may name (their rules differ: Gemini 2.5 neither requires thought
# signatures nor takes thinking levels)
MORE_MODELS = {"gemini": ("gemini-2.5-flash", "gemini-2.5-pro")}
OTHER_MODELS = {
    "anthropic": "claude-opus-4-1",
    "openai_responses": "o4-mini",
    "openai_chat": "gpt-4o",
    "gemini": "gemini-3-flash-preview",
    "mistral": "mistral-large-latest",
    "kimi": "kimi-k2-0905-preview",
    "deepseek": "deepseek-chat",
}
OWN_PROVIDER = "primary"
OTHER_PROVIDER = "secondary"  # same kind and model, another provider entry: another scope

ISSUERS = ("own", "client", "foreign_kind", "other_model", "other_scope")
TOOL_NAMES = ("get_weather", "search", "noop")
TOOLS = (
    ToolSpec(
        "get_weather",
        "Weather for a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    ToolSpec(
        "search", "", {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}}
    ),
    ToolSpec("noop"),
)
PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="
IMAGES = (Image(PNG), Image("https://example.com/cat.png", "low"))

texts = st.sampled_from(["", " ", "\n", "Hello.", "Done, see below. ", " two  words", "ünïcødé ✓"]) | st.text(
    alphabet="ab \n", max_size=5
)
arguments = st.dictionaries(
    st.sampled_from(["city", "q", "n"]), st.integers(0, 9) | st.sampled_from(["Paris", "x y"]), max_size=2
)


def native_id(kind: str, name: str, n: int) -> str:
    """An id as the provider issues them; Kimi's index may be stale (and collide) after compaction."""
    return {
        "anthropic": f"toolu_01{n:06d}",
        "gemini": f"g{n:07d}",
        "mistral": f"M{n:08d}",
        "kimi": f"functions.{name}:{n % 5}",
        "deepseek": f"call_00_{n}",
    }.get(kind, f"call_{n}")


def target_for(kind: str, thinking: bool = False, policy: str = "drop", model: str | None = None) -> Target:
    budget = {"anthropic": 2048, "gemini": 1024}.get(kind) if thinking else None
    return Target(
        OWN_PROVIDER,
        kind,
        model or MODELS[kind],
        "http://sim.invalid",
        thinking_budget=budget,
        reasoning_policy=policy,
    )


def state_for(kind: str) -> SimulatorState:
    """The simulator state validating `kind`: same secret as the one that minted its tokens."""
    return SimulatorState(kind)


# -- specs drawn by hypothesis --------------------------------------------------------------------


@dataclass(frozen=True)
class BlockSpec:
    what: str  # reasoning | redacted | text | call
    issuer: str
    text: str
    name: str = "noop"
    args: dict[str, Any] = field(default_factory=dict)
    reuse: int | None = None  # call: reuse the id of an earlier call (mod the count)


block_specs = st.builds(
    BlockSpec,
    what=st.sampled_from(["reasoning", "redacted", "text", "call", "call"]),
    issuer=st.sampled_from(ISSUERS),
    text=texts,
    name=st.sampled_from(TOOL_NAMES),
    args=arguments,
    reuse=st.none() | st.none() | st.none() | st.integers(0, 20),
)

# a turn the target itself produced, shaped as its API returns them: reasoning first, then text
# and calls (all with the target's own continuity)
own_turns = st.tuples(
    st.just("own_turn"),
    st.booleans(),
    st.sampled_from(["", "Let me check.", "Here it is."]),
    st.lists(st.tuples(st.sampled_from(TOOL_NAMES), arguments), max_size=3),
    st.booleans(),
)
user_steps = st.tuples(
    st.just("user"), st.sampled_from(["What is the weather?", "Thanks!", "Go on."]) | texts, st.booleans()
)
complete_results = st.tuples(st.just("complete"), st.booleans())
steps = st.one_of(
    user_steps,
    own_turns,
    complete_results,
    user_steps,
    own_turns,
    complete_results,
    st.tuples(
        st.just("assistant"),
        st.lists(block_specs, min_size=1, max_size=5),
        st.booleans(),
        st.sampled_from(ISSUERS),
    ),
    # results for calls picked by position (mod the count), laid out in one way or another
    st.tuples(
        st.just("results"),
        st.lists(st.integers(0, 20), min_size=1, max_size=6),
        st.sampled_from(["one", "split", "in_user", "synthetic"]),
        st.booleans(),
        st.sampled_from(["result", "", " "]),
    ),
    st.tuples(st.just("orphan"), st.sampled_from(["call_gone", "toolu_01XyZ", "functions.search:7"])),
    st.tuples(st.just("duplicate"), st.integers(0, 30)),
    st.tuples(st.just("delete"), st.integers(0, 30)),
)


# -- building a transcript from the specs -----------------------------------------------------------


class Builder:
    """Turns drawn specs into canonical messages, minting each issuer's continuity."""

    def __init__(self, target: Target, strict: bool) -> None:
        self.target = target
        self.kind = target.kind
        self.strict = strict
        self.state = state_for(self.kind)
        self.messages: list[Message] = []
        self.call_ids: list[str] = []
        self.last_calls: list[str] = []  # ids of the latest assistant message's calls
        self.serial = 0
        # arbitrary transcripts carry images anywhere (repair places them or leaves placeholders);
        # valid ones only where the target's model reads them (its family's MediaRule)
        self.images_anywhere = True

    def sees_images(self) -> bool:
        return self.images_anywhere or get_adapter(self.kind).capabilities.media.sees_images(
            self.target.model
        )

    def next_serial(self) -> int:
        self.serial += 1
        return self.serial

    def key(self) -> str:
        return hashlib.sha1(f"key-{self.next_serial()}".encode()).hexdigest()  # 40 hex characters

    def issuer_meta(self, issuer: str, data: Callable[[str], dict[str, Any]]) -> Continuity | None:
        """Meta from `issuer`; `data(model)` mints this kind's token for a model."""
        t = self.target
        if issuer == "own":
            return t.continuity(data(t.model))
        if issuer == "other_model":
            return Continuity(
                t.provider, t.continuity_scope, t.kind, OTHER_MODELS[t.kind], data(OTHER_MODELS[t.kind])
            )
        if issuer == "other_scope":
            return Continuity(OTHER_PROVIDER, OTHER_PROVIDER, t.kind, t.model, data(t.model))
        if issuer == "foreign_kind":
            others = len(KINDS) - 1  # a kind other than the target's, in turn
            kind = KINDS[(KINDS.index(t.kind) + 1 + self.serial % others) % len(KINDS)]
            garbage = {
                "signature": "forged",
                SIGNATURE: "Zm9yZ2Vk",
                "id": "rs_forged",
                "encrypted_content": "x",
            }
            return Continuity("elsewhere", "elsewhere", kind, MODELS[kind], garbage)
        if issuer == "any_issuer":  # an echoed raw token of unknown issuer, here a forged one
            return Continuity(
                ANY_ISSUER, ANY_ISSUER, t.kind, ANY_ISSUER, {"signature": "forged", SIGNATURE: "Zm9yZ2Vk"}
            )
        return None

    # each kind's tokens, valid for `model` ----------------------------------------------------

    def reasoning(self, spec: BlockSpec) -> Reasoning:
        kind, state = self.kind, self.state
        if spec.issuer in ("client", "foreign_kind", "any_issuer"):
            return Reasoning(spec.text, self.issuer_meta(spec.issuer, lambda m: {}))
        if kind == "anthropic":
            if spec.what == "redacted":
                nonce = self.key()[:32]
                return Reasoning(
                    "", self.issuer_meta(spec.issuer, lambda m: {"redacted": redacted_data(state, m, nonce)})
                )
            return Reasoning(
                spec.text,
                self.issuer_meta(
                    spec.issuer, lambda m: {"signature": thinking_signature(state, m, spec.text)}
                ),
            )
        if kind == "openai_responses":
            item_id = "rs_" + self.key()
            summary = [spec.text] if spec.text else []
            meta = self.issuer_meta(
                spec.issuer,
                lambda m: {
                    "id": item_id,
                    "summary": summary,
                    "encrypted_content": encrypted_content(state, m, item_id, summary),
                },
            )
            return Reasoning("\n\n".join(summary), meta)
        return Reasoning(spec.text, self.issuer_meta(spec.issuer, lambda m: {}))

    def assistant(self, specs: list[BlockSpec], seal: bool, seal_issuer: str) -> Message:
        blocks: list[Block] = []
        chain: str | None = None  # Responses: key of the own reasoning item calls are bound to
        calls_in_message = 0
        for spec in specs:
            if spec.what in ("reasoning", "redacted"):
                block = self.reasoning(spec)
                blocks.append(block)
                own = (
                    block.meta is not None and block.meta.kind == "openai_responses" and spec.issuer == "own"
                )
                chain = block.meta.data["id"][3:] if own else None
            elif spec.what == "text":
                blocks.append(Text(spec.text))
                chain = None
            else:
                blocks.append(self.call(spec, chain, calls_in_message))
                calls_in_message += 1
        if seal and self.kind == "gemini" and calls_in_message == 0:
            # Gemini seals a text answer with a signature over the turn's whole visible text
            text = "".join(b.text for b in blocks if type(b) is Text)
            state = self.state
            blocks.append(
                Text(
                    "",
                    self.issuer_meta(seal_issuer, lambda m: {SIGNATURE: state.sign(*text_covers(m, text))}),
                )
            )
        return Message(Role.ASSISTANT, tuple(blocks))

    def call(self, spec: BlockSpec, chain: str | None, position: int) -> ToolCall:
        if spec.reuse is not None and self.call_ids:
            call_id = self.call_ids[spec.reuse % len(self.call_ids)]
        else:
            call_id = f"call_{self.next_serial()}"
        self.call_ids.append(call_id)
        arguments = orjson.dumps(spec.args).decode()
        state, kind, n = self.state, self.kind, self.next_serial()

        def data(model: str) -> dict[str, Any]:
            out: dict[str, Any] = {NATIVE_ID: native_id(kind, spec.name, n)}
            if kind == "gemini" and position == 0:
                out[SIGNATURE] = state.sign(*call_covers(model, spec.name, spec.args))
            if kind == "openai_responses" and chain is not None:
                out["item_id"] = f"fc_{chain}_{position}"
            return out

        return ToolCall(call_id, spec.name, arguments, self.issuer_meta(spec.issuer, data))

    def own_turn(self, reasoning: bool, text: str, calls: list[tuple[str, dict]], seal: bool) -> Message:
        # each answer's reasoning is its own (a provider never issues the same token twice)
        specs = (
            [BlockSpec("reasoning", "own", f"Thinking it over ({self.next_serial()}).")] if reasoning else []
        )
        if text:
            specs.append(BlockSpec("text", "own", text))
        specs += [BlockSpec("call", "own", "", name, args) for name, args in calls]
        if not specs:
            specs.append(BlockSpec("text", "own", "Nothing to add."))
        message = self.assistant(specs, seal, "own")
        self.last_calls = [b.id for b in message.blocks if type(b) is ToolCall]
        return message

    def complete(self, split: bool) -> list[Message]:
        """Results for every call of the latest assistant message, in order."""
        results = [ToolResult(call_id, f"result of {call_id}") for call_id in self.last_calls]
        self.last_calls = []
        if not results:
            return []
        if split:
            return [Message(Role.TOOL, (r,)) for r in results]
        return [Message(Role.TOOL, tuple(results))]

    def results(self, picks: list[int], layout: str, error: bool, content: str) -> list[Message]:
        if not self.call_ids:
            return []
        images = IMAGES[:1] if error else ()
        results = []
        for n, pick in enumerate(picks):
            call_id = self.call_ids[pick % len(self.call_ids)]
            if layout == "synthetic":
                results.append(synthetic_result(call_id))
            else:
                results.append(ToolResult(call_id, content, is_error=error and n == 0, images=images))
        if layout == "split":
            return [Message(Role.TOOL, (r,)) for r in results]
        if layout == "in_user":
            return [Message(Role.USER, (*results, Text("Here you go.")))]
        return [Message(Role.TOOL, tuple(results))]

    def apply(self, step: tuple) -> None:
        what = step[0]
        if what == "user":
            _, text, image = step
            blocks: tuple[Block, ...] = (Text(text),)
            if image and self.sees_images():
                blocks += IMAGES
            self.messages.append(Message(Role.USER, blocks))
        elif what == "assistant":
            _, specs, seal, seal_issuer = step
            message = self.assistant(specs, seal, seal_issuer)
            self.last_calls = [b.id for b in message.blocks if type(b) is ToolCall]
            self.messages.append(message)
        elif what == "own_turn":
            self.messages.append(self.own_turn(*step[1:]))
        elif what == "complete":
            self.messages.extend(self.complete(step[1]))
        elif what == "results":
            self.messages.extend(self.results(*step[1:]))
        elif what == "orphan":
            self.messages.append(Message(Role.TOOL, (ToolResult(step[1], "stale"),)))
        elif what == "duplicate" and self.messages:
            self.messages.append(self.messages[step[1] % len(self.messages)])
        elif what == "delete" and self.messages:
            del self.messages[step[1] % len(self.messages)]


def _issuers(strict: bool) -> tuple[str, ...]:
    # forged tokens of unknown issuer are offered to their kind by design (rejection recovery
    # removes them); only strict mode promises they never go out
    return (*ISSUERS, "any_issuer") if strict else ISSUERS


# The strategies the composites below draw from, built once: a strategy built inside a draw is
# built and validated again at every draw; the same strategies, the same draws.
_OPENS = st.integers(0, 4)
_STEPS = st.lists(steps, min_size=1, max_size=14)
_ISSUERS = {strict: st.sampled_from(_issuers(strict)) for strict in (False, True)}
_TOOL_SETS = st.sampled_from([(), TOOLS])
_MODES = [None, ToolChoice(ToolChoiceMode.AUTO), ToolChoice(ToolChoiceMode.NONE)]
# the tool choices there are without tools, and with them
_TOOL_CHOICES = {
    False: st.sampled_from(_MODES),
    True: st.sampled_from(
        [*_MODES, ToolChoice(ToolChoiceMode.REQUIRED), ToolChoice(ToolChoiceMode.TOOL, "search")]
    ),
}
_SYSTEMS = st.sampled_from(["", "You are terse."])
_MAX_TOKENS = st.sampled_from([None, 512, 1024, 1025, 9000])
_TEMPERATURES = st.sampled_from([None, 0.5])
_EFFORTS = st.sampled_from([None, *REASONING_EFFORTS])


@st.composite
def requests(draw: st.DrawFn, target: Target, strict: bool) -> Request:
    builder = Builder(target, strict)
    if draw(_OPENS):  # mostly, the conversation opens with the user's question
        builder.apply(("user", "What is the weather in Paris?", False))
    for step in draw(_STEPS):
        if strict and step[0] == "assistant" and draw(st.booleans()):
            specs = [
                BlockSpec(s.what, draw(_ISSUERS[strict]), s.text, s.name, s.args, s.reuse) for s in step[1]
            ]
            step = (step[0], specs, step[2], step[3])
        builder.apply(step)
    tools = draw(_TOOL_SETS)
    return Request(
        model="group",
        messages=tuple(builder.messages),
        system=draw(_SYSTEMS),
        tools=tools,
        tool_choice=draw(_TOOL_CHOICES[bool(tools)]),
        max_tokens=draw(_MAX_TOKENS),
        temperature=draw(_TEMPERATURES),
        reasoning_effort=draw(_EFFORTS),
    )


# -- transcripts already valid for the target ---------------------------------------------------

clean_texts = st.sampled_from(["Checking.", "Here is the forecast.", "All done", "Ünïcødé ✓"])
_ROUNDS = st.integers(1, 3)
_TOOL_STEPS = st.integers(0, 2)
_CALLS = st.lists(st.tuples(st.sampled_from(TOOL_NAMES), arguments), min_size=1, max_size=3)
_CALL_TEXTS = st.sampled_from(["", "Let me check."])


@st.composite
def valid_requests(draw: st.DrawFn, target: Target, needs_reasoning_on_calls: bool, replays: bool) -> Request:
    """Conversations shaped as the target itself would have produced them: rounds of a user
    question, tool steps (a call message, then all its results) and a final answer; the last
    round may stop inside its tool loop. `needs_reasoning_on_calls`: every call message starts
    with the target's reasoning (Anthropic thinking, DeepSeek/Kimi thinking mode). Messages are
    grouped as the target's wire groups them (repair merges them otherwise): one message per user
    turn for Anthropic, one message per step's results for Gemini."""
    caps = get_adapter(target.kind).capabilities
    builder = Builder(target, strict=False)
    builder.images_anywhere = False
    rounds = draw(_ROUNDS)
    for n in range(rounds):
        builder.apply(("user", draw(clean_texts), draw(st.booleans())))
        for _ in range(draw(_TOOL_STEPS)):
            reasoning = needs_reasoning_on_calls or (replays and draw(st.booleans()))
            calls = draw(_CALLS)
            text = draw(_CALL_TEXTS)
            builder.messages.append(builder.own_turn(reasoning, text, calls, False))
            split = draw(st.booleans()) and not (caps.merge_tool_runs or caps.merge_user_turns)
            builder.messages.extend(builder.complete(split))
        if n == rounds - 1 and builder.messages[-1].role is Role.TOOL and draw(st.booleans()):
            break  # the request continues the open tool loop
        reasoning = replays and draw(st.booleans())
        builder.messages.append(builder.own_turn(reasoning, draw(clean_texts), [], draw(st.booleans())))
        if n == rounds - 1:
            builder.apply(("user", draw(clean_texts), False))
    return Request(model="group", messages=tuple(builder.messages), tools=TOOLS)
