"""What is decided about one request for one target (gateway/transcript/reasoning.py decides it):
the reasoning sent, whether the client sees it, how structured output travels. A prepared
Request carries it (`Request.decision`), so these are transcript values like model.py's: frozen
msgspec Structs out of the collector's sight, in a module of their own that model.py can import
(the deciding code needs model.py)."""

from __future__ import annotations

import enum

from msgspec import Struct
from msgspec.structs import replace


class OutputMode(str, enum.Enum):
    """How one request's structured output (Request.response_format) reaches a provider."""

    SCHEMA = "schema"  # the API's own JSON-schema output (constrained decoding)
    JSON_OBJECT = "json_object"  # the API's JSON mode; a schema, if any, goes in the instructions
    FORCED_TOOL = "forced_tool"  # one tool whose input is the answer, and tool_choice forcing it


class ReasoningChoice(Struct, frozen=True, gc=False):
    """What one request asks a model to do about reasoning. Fitted to a model, at most one of
    effort / budget / adaptive is set; `default` sends no reasoning parameter at all."""

    on: bool
    effort: str | None = None
    budget: int | None = None
    adaptive: bool = False
    default: bool = False

    def label(self) -> str:
        if self.default:
            return "default"
        if not self.on:
            return "off"
        if self.budget is not None:
            return f"budget={self.budget}"
        if self.effort is not None:
            return f"effort={self.effort}"
        return "adaptive" if self.adaptive else "on"


OFF_CHOICE = ReasoningChoice(False)
MODEL_DEFAULT = ReasoningChoice(False, default=True)


class Decision(Struct, frozen=True, gc=False):
    """Everything decided about one request for one target, carried to the encoder, the decoder
    and the exchange."""

    reasoning: ReasoningChoice
    shown: bool  # the client's answer carries the model's reasoning
    output: OutputMode | None  # how structured output travels (None: none asked, or a forced call)
    requested: str | None = None  # the client's explicit choice, labelled (None: it said nothing)
    by: str | None = None  # "target" | "model" | "repair": who changed the client's choice

    def header(self) -> str | None:
        """`X-Gateway-Reasoning`, when what was sent is not what the client asked for."""
        if self.by is None:
            return None
        return f"sent={self.reasoning.label()}; requested={self.requested}; by={self.by}"

    def thinking_off(self, by: str) -> Decision:
        """Reasoning turned off after the decision (Anthropic's tool-loop switch, counted as a
        repair); the client is told when it had asked for reasoning."""
        told = by if self.requested not in (None, "off") else self.by
        return replace(self, reasoning=OFF_CHOICE, by=told)
