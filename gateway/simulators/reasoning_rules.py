"""What each simulated model accepts as reasoning parameters: the simulators' own tables (they
never read the gateway's capability data), with the providers' wording where it is known.

OpenAI (https://platform.openai.com/docs/guides/reasoning): "none" from gpt-5.1 on, gpt-5 takes
"minimal", the o-series low/medium/high, gpt-5-pro only high; non-reasoning models refuse the
parameter. The wordings are the API's (reported in llm-subtrans#388, livekit/agents#3966,
BoundaryML/baml#2708).
"""

from __future__ import annotations

import re

# (model pattern, the efforts it takes), first match wins; a model matching none takes no effort
_OPENAI_EFFORTS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(pattern), efforts)
    for pattern, efforts in (
        (r"(?:ft:)?gpt-5(?:\.\d+)?-pro", ("high",)),
        (r"(?:ft:)?gpt-5-chat", ()),
        (r"(?:ft:)?gpt-5\.1", ("none", "low", "medium", "high")),
        (r"(?:ft:)?gpt-5\.\d", ("none", "low", "medium", "high", "xhigh")),
        (r"(?:ft:)?gpt-5", ("minimal", "low", "medium", "high")),
        (r"(?:ft:)?o[1-9]", ("low", "medium", "high")),
    )
)


def openai_efforts(model: str) -> tuple[str, ...]:
    for pattern, efforts in _OPENAI_EFFORTS:
        if pattern.match(model):
            return efforts
    return ()


def _listed(values: tuple[str, ...]) -> str:
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


def openai_effort_problem(model: str, effort: object, param: str) -> tuple[str, str] | None:
    """(message, code) when `model` refuses `effort` given as `param` ("reasoning_effort" in chat,
    "reasoning.effort" in Responses)."""
    efforts = openai_efforts(model)
    if not efforts:
        return f"Unsupported parameter: '{param}' is not supported with this model.", "unsupported_parameter"
    if effort not in efforts:
        return (
            f"Unsupported value: '{param}' does not support '{effort}' with this model. Supported values"
            f" are: {_listed(efforts)}.",
            "unsupported_value",
        )
    return None


# Gemini (https://ai.google.dev/gemini-api/docs/thinking): the thinking levels of each Gemini 3
# model, and the thinking budget range of each 2.5 model (-1: dynamic; 0 only where thinking can
# be turned off)
GEMINI_LEVELS = (
    (re.compile(r"(?:models/)?gemini-3(?:\.\d+)?-flash"), ("minimal", "low", "medium", "high")),
    (re.compile(r"(?:models/)?gemini-3"), ("low", "high")),
)
GEMINI_BUDGETS = (
    (re.compile(r"(?:models/)?gemini-2\.5-pro"), (128, 32768)),
    (re.compile(r"(?:models/)?gemini-2\.5-flash-lite"), (0, 24576)),
    (re.compile(r"(?:models/)?gemini-2\.5-flash"), (0, 24576)),
)


def gemini_levels(model: str) -> tuple[str, ...]:
    return next((levels for pattern, levels in GEMINI_LEVELS if pattern.match(model)), ())


def gemini_budget_range(model: str) -> tuple[int, int] | None:
    return next((span for pattern, span in GEMINI_BUDGETS if pattern.match(model)), None)
