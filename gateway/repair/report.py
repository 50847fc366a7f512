"""What a repair pass changed: feeds `gateway_repairs_total{kind}` and the access log."""

from __future__ import annotations

from dataclasses import dataclass

# the `kind` label values of gateway_repairs_total (a fixed contract, DESIGN.md section 2)
REPAIR_KINDS = (
    "synthetic_tool_result",
    "orphan_tool_result_dropped",
    "duplicate_tool_result_dropped",
    "tool_result_moved",
    "tool_id_projected",
    "continuity_restored",
    "reasoning_dropped",
    "reasoning_as_text",
    "thinking_disabled",
    "placeholder_thought_signature",
    "reasoning_content_filled",
    "retried_after_rejection",
    "empty_turn_dropped",
    # added with the exchange pipeline (README "Repair kinds")
    "system_message_as_user",
    # added with structured outputs and prompt caching
    "thinking_off_for_forced_tool",
    "cache_breakpoint_dropped",
    # added with the Responses ingress (README "Repair kinds")
    "custom_tool_as_function",
    "hosted_tool_dropped",
    # added with the Messages ingress
    "provider_option_dropped",
    # added with rich content (README "Repair kinds")
    "media_as_placeholder",
    "tool_result_media_moved",
    "server_tool_as_text",
    "citations_as_text",
    # added with the family and dialect records (issue 18): inserted messages, apart from results
    "synthetic_message",
)


@dataclass(frozen=True, slots=True)
class Repair:
    kind: str  # one of REPAIR_KINDS
    detail: str = ""

    def __post_init__(self) -> None:
        if self.kind not in REPAIR_KINDS:
            raise ValueError(f"unknown repair kind {self.kind!r}")
