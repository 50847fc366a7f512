"""Continuity tokens that clients echo in other gateways' and providers' formats.

- LiteLLM `thinking_blocks` on assistant messages, and the Messages dialect's own thinking blocks:
  raw Anthropic blocks ({"type": "thinking", "thinking", "signature"} / {"type":
  "redacted_thinking", "data"}).
- A Gemini thought signature on a tool call: LiteLLM's `provider_specific_fields.thought_signature`
  and Google's OpenAI-compatible `extra_content.google.thought_signature`.

The issuer of such a token is unknown (ANY_ISSUER): it is offered to targets of that provider kind
only. The `data` layouts written here are those of gateway.providers.anthropic / .gemini;
tests/ingress/test_echo_formats.py encodes the result with those providers to keep them in step.
"""

from __future__ import annotations

from typing import Any

from gateway.transcript.model import ANY_ISSUER, Continuity, Reasoning

_CLIENT = "client"


def _echoed(kind: str, data: dict[str, str]) -> Continuity:
    return Continuity(_CLIENT, ANY_ISSUER, kind, ANY_ISSUER, data)


def thinking_blocks(blocks: list[Any]) -> tuple[list[Reasoning], int]:
    """Reasoning blocks from LiteLLM thinking_blocks, and how many entries were unusable."""
    out: list[Reasoning] = []
    ignored = 0
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "thinking" and isinstance(block.get("thinking"), str) and _token(block.get("signature")):
            out.append(anthropic_thinking(block["thinking"], block["signature"]))
        elif kind == "redacted_thinking" and _token(block.get("data")):
            out.append(anthropic_redacted(block["data"]))
        else:
            ignored += 1
    return out, ignored


def anthropic_thinking(text: str, signature: str) -> Reasoning:
    """A thinking block with a raw Anthropic signature, as a client echoes it."""
    return Reasoning(text, _echoed("anthropic", {"signature": signature}))


def anthropic_redacted(data: str) -> Reasoning:
    """A redacted_thinking block's raw data, as a client echoes it."""
    return Reasoning("", _echoed("anthropic", {"redacted": data}))


def anthropic_token(meta: Continuity | None) -> tuple[str, str] | None:
    """("signature", value) or ("redacted", data) when `meta` is an Anthropic thinking token, which
    a Messages client is given in the provider's own form (so its history replays natively)."""
    if meta is None or meta.kind != "anthropic":
        return None
    for key in ("signature", "redacted"):
        value = meta.data.get(key)
        if isinstance(value, str) and value:
            return key, value
    return None


def tool_call_signature(extra: dict[str, Any] | None) -> tuple[Continuity | None, int]:
    """A Gemini thought signature carried on a tool call, and 1 if one was present but unusable."""
    if not extra:
        return None, 0
    candidates = []
    psf = extra.get("provider_specific_fields")
    if isinstance(psf, dict) and "thought_signature" in psf:
        candidates.append(psf["thought_signature"])
    ec = extra.get("extra_content")
    google = ec.get("google") if isinstance(ec, dict) else None
    if isinstance(google, dict) and "thought_signature" in google:
        candidates.append(google["thought_signature"])
    for candidate in candidates:
        if _token(candidate):
            return _echoed("gemini", {"thought_signature": candidate}), 0
    return None, 1 if candidates else 0


def _token(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 1_000_000
