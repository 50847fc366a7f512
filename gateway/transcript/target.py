"""What a request is sent to: one upstream model on one configured provider entry, and the
capability flags of that provider's kind. Pure data, shared by routing, repair and providers."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gateway.transcript.decision import OutputMode
from gateway.transcript.model import Continuity, Request, ToolChoiceMode


@dataclass(frozen=True, slots=True)
class ToolIdRule:
    """The tool-call id format a provider accepts."""

    pattern: str  # regex an id must fully match
    max_len: int
    style: str  # "prefixed" (prefix + digest), "alnum9" (Mistral), "kimi" (functions.name:idx)
    prefix: str = ""


@dataclass(frozen=True, slots=True)
class StructuredOutput:
    """What a provider offers for structured output, by model. Patterns are matched with
    `re.match` against the upstream model id; None matches no model."""

    schema_models: str | None = ".*"  # models with native JSON-schema output
    json_object: bool = True  # the API has a JSON-object mode
    # how a request is honoured where the above cannot: JSON_OBJECT or FORCED_TOOL
    fallback: OutputMode = OutputMode.JSON_OBJECT
    # models that take a JSON response format together with function tools
    with_tools_models: str | None = ".*"

    def mode(self, model: str, schema: bool) -> OutputMode:
        if schema and self.schema_models is not None and re.match(self.schema_models, model):
            return OutputMode.SCHEMA
        if not schema and self.json_object:
            return OutputMode.JSON_OBJECT
        return self.fallback

    def with_tools(self, model: str) -> bool:
        return self.with_tools_models is not None and re.match(self.with_tools_models, model) is not None


def output_mode(request: Request, model: str, rule: StructuredOutput) -> OutputMode | None:
    """How `request`'s structured output goes to `model`; None when it asks for none, or when the
    client forces a tool call of its own this turn (the answer is that call, not the format)."""
    fmt = request.response_format
    if fmt is None:
        return None
    choice = request.tool_choice
    if request.tools and choice is not None and choice.mode in (ToolChoiceMode.REQUIRED, ToolChoiceMode.TOOL):
        return None
    return rule.mode(model, fmt.schema is not None)


OFF = "none"  # the reasoning effort that means "no reasoning"
EFFORTS = ("minimal", "low", "medium", "high", "xhigh")  # reasoning effort levels, ascending


@dataclass(frozen=True, slots=True)
class ThinkingModel:
    """What the models whose id `re.match`es `pattern` can do about reasoning."""

    pattern: str
    reasons: bool = True  # the model can reason at all
    can_off: bool = True  # a request can turn its reasoning off
    efforts: tuple[str, ...] = ()  # the effort levels it takes (ascending, "none" never here)
    budgets: tuple[int, int] | None = None  # (least, most) thinking tokens it takes
    adaptive: bool = False  # it sizes its own thinking when asked (Anthropic adaptive thinking)
    _compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", re.compile(self.pattern))

    def matches(self, model: str) -> bool:
        return self._compiled.match(model) is not None


NEVER = ThinkingModel("", reasons=False)

# thinking tokens an effort stands for, where a family says nothing else (a client's budget is
# read as the effort nearest to it on a model that takes levels)
EFFORT_BUDGETS: Mapping[str, int] = MappingProxyType(
    {"minimal": 512, "low": 1024, "medium": 4096, "high": 16384, "xhigh": 32768}
)


@dataclass(frozen=True, slots=True)
class ThinkingRule:
    """A family's reasoning capabilities by model (first match wins; other models do not reason),
    and the budget its budget-taking models are given for an effort."""

    models: tuple[ThinkingModel, ...] = ()
    effort_budgets: Mapping[str, int] = field(default_factory=lambda: EFFORT_BUDGETS)
    # name -> its entry, found once (a regex scan per entry ran a few times per request);
    # bounded, as a direct address names any model
    _found: dict[str, ThinkingModel] = field(default_factory=dict, init=False, repr=False, compare=False)

    def model(self, name: str) -> ThinkingModel:
        found = self._found.get(name)
        if found is not None:
            return found
        found = next((entry for entry in self.models if entry.matches(name)), NEVER)
        if len(self._found) < _MODELS_KEPT:
            self._found[name] = found
        return found


_MODELS_KEPT = 256


@dataclass(frozen=True, slots=True)
class ModelNameRule:
    """The upstream model names a provider family can have: what a config target or a client's
    `<provider>/<model>` may name. A name outside it is refused before anything is sent, so no
    client string of any length or alphabet reaches an upstream URL, body or log line."""

    pattern: str  # regex a name must fully match
    max_len: int
    _compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", re.compile(self.pattern))

    def problem(self, name: str) -> str | None:
        """Why `name` is not a model name of this family, or None when it is one."""
        if len(name) > self.max_len:
            return f"longer than {self.max_len} characters"
        if self._compiled.fullmatch(name) is None:
            return f"does not match {self.pattern}"
        return None


class MediaPlacement(str, enum.Enum):
    """Where an image or document a tool returned may go on a family's wire."""

    INLINE = "inline"  # inside the tool result itself
    AFTER = "after"  # in a user message right after the turn's tool results
    NONE = "none"  # nowhere: a text placeholder says what was left out


IMAGE_TYPES = frozenset(("image/png", "image/jpeg", "image/gif", "image/webp"))


@dataclass(frozen=True, slots=True)
class MediaRule:
    """What images and documents a family takes, and where. Patterns are matched with `re.match`
    against the upstream model id. What a model cannot take becomes a text placeholder (a
    counted repair), never a request the provider refuses."""

    tool_result_images: MediaPlacement = MediaPlacement.AFTER
    tool_result_documents: MediaPlacement = MediaPlacement.AFTER
    image_types: frozenset[str] = IMAGE_TYPES  # media types of inline (data:) images
    max_image_bytes: int | None = None  # decoded size of one inline image
    vision_models: str | None = ".*"  # models that read images; None: none does
    # documents (beyond plain text, which is text everywhere): inline PDF data, and by URL
    pdf_data: bool = False
    document_urls: bool = False

    def sees_images(self, model: str) -> bool:
        return self.vision_models is not None and re.match(self.vision_models, model) is not None


# names as most APIs spell their models: "gpt-4.1", "claude-sonnet-4-5", "kimi-k2-0905-preview"
PLAIN_MODEL_NAMES = ModelNameRule(r"[A-Za-z0-9][A-Za-z0-9._-]*", 128)


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Provider quirks as data; repair passes read these instead of branching on provider kind."""

    tool_ids: ToolIdRule
    model_names: ModelNameRule = PLAIN_MODEL_NAMES
    # its own reasoning can be replayed to it (signatures, encrypted items, reasoning_content)
    reasoning_replay: bool = False
    # assistant turns with tool calls must carry reasoning_content (DeepSeek / Kimi thinking)
    reasoning_content_on_tool_turns: bool = False
    # Gemini 3: placeholder accepted where a thought signature is required but unavailable
    thought_signature_placeholder: str | None = None
    # Anthropic with thinking on: the open tool loop must start with a signed thinking block
    signed_thinking_for_tool_loop: bool = False
    # Mistral: a user message may not directly follow a tool message
    user_after_tool_forbidden: bool = False
    # Gemini: the Continuity.data key that carries a thought signature (where the placeholder goes)
    thought_signature_key: str | None = None
    # Anthropic: the conversation opens with a user message
    first_message_user: bool = False
    # Anthropic: consecutive assistant messages are one message on the wire; repair merges them so
    # the placement rules below judge what the provider will see
    merge_assistant_runs: bool = False
    # Anthropic: the user side of a turn (tool results, then the user's own content) is one
    # message on the wire; repair merges it, so the encoder maps messages one to one
    merge_user_turns: bool = False
    # Gemini: the results of one step answer one function-call turn, in one message
    merge_tool_runs: bool = False
    # OpenAI-style APIs: a system message may stand anywhere in the conversation; elsewhere
    # instructions given mid-conversation become user text at that point
    system_messages_in_place: bool = False
    # Gemini: a turn with tool calls comes right after a user turn or a tool-result turn
    calls_follow_user_turn: bool = False
    # Mistral: the last message is the user's or a tool's (an assistant only as a prefix)
    last_message_user_or_tool: bool = False
    # Anthropic: an assistant message holding reasoning starts with it and does not end with it
    reasoning_leads_message: bool = False
    # OpenAI Responses: a reasoning item is directly followed by its output (a message or a call)
    reasoning_precedes_output: bool = False
    # Anthropic: text blocks hold non-whitespace text, and a final assistant text may not end in
    # whitespace
    blank_text_forbidden: bool = False
    # Anthropic: thinking cannot be on while tool_choice forces a tool call
    thinking_forbids_forced_tool_choice: bool = False
    # Anthropic: the smallest thinking budget; a max_tokens at or below it leaves no room to think
    min_thinking_budget: int | None = None
    # OpenAI Responses: custom (freeform) tools and their calls travel natively; elsewhere repair
    # maps them to function tools taking one string
    custom_tools: bool = False
    # OpenAI Chat: an assistant message with `content: ""` and nothing else is valid; every other
    # family refuses it ("all messages must have non-empty content", "contents.parts must not be
    # empty", Mistral's "must have either content or tool_calls") or is not known to take it
    empty_assistant_turn_ok: bool = False
    # structured output (Request.response_format): native schema, JSON mode, or a forced tool
    structured_output: StructuredOutput = field(default_factory=StructuredOutput)
    # Anthropic: at most this many cache_control breakpoints in one request (None: the provider
    # caches implicitly and takes none)
    max_cache_breakpoints: int | None = None
    # its own server-tool history (and citations) can be sent back to it as it issued them;
    # elsewhere, and for a family whose server-tool data is response metadata (Gemini grounding),
    # repair renders them as text
    server_tool_replay: bool = False
    # images and documents: which it takes and where a tool's may go
    media: MediaRule = field(default_factory=MediaRule)
    # Anthropic: the `anthropic-beta` flags a client may pass through (features whose request and
    # answer shapes the adapter handles); the others are dropped for the target, and counted
    client_betas: frozenset[str] = frozenset()
    # what each model can do about reasoning (gateway/transcript/reasoning.py decides with it)
    thinking: ThinkingRule = field(default_factory=ThinkingRule)


@dataclass(frozen=True, slots=True)
class Target:
    provider: str  # config entry name
    kind: str
    model: str  # upstream model id
    base_url: str
    scope: str = ""  # continuity scope (continuity_group or provider name)
    thinking_budget: int | None = None
    reasoning_effort: str | None = None
    # the target's thinking_budget / reasoning_effort win over a client's own choice (said in the
    # answer's X-Gateway-Reasoning header); otherwise they apply when the client says nothing
    pin_reasoning: bool = False
    reasoning_policy: str = "drop"  # drop | as_text
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def continuity_scope(self) -> str:
        return self.scope or self.provider

    def continuity(self, data: Mapping[str, Any]) -> Continuity:
        """Stamp provider-private continuity data with this target as its issuer."""
        return Continuity(self.provider, self.continuity_scope, self.kind, self.model, data)

    def owns(self, meta: Continuity | None) -> bool:
        return (
            meta is not None and meta.kind == self.kind and meta.valid_for(self.continuity_scope, self.model)
        )
