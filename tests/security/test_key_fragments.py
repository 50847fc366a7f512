"""No fragment of a configured secret leaves the gateway: not the key, not 8 consecutive
characters of it, not a masked echo (`sk-proj-****wxyz`, first 8 + last 4) - in a response body,
a header, a log line or a metric. An upstream 401/403 reaches the client in the gateway's own
words (which provider refused the gateway's key), not the provider's."""

from __future__ import annotations

import io
import logging
import re

import orjson
import pytest

from gateway.access_log import configure_logging
from gateway.demo import DEMO_KEY_ENV
from gateway.redaction import REDACTED, Redactor, secrets_redactor
from gateway.simulators.base import Fault, Reply
from tests.security.conftest import USER, serving

# shaped like an OpenAI project key; no run of 8 lowercase letters in it (see Redactor)
KEY = "sk-proj-Q7fK2mXr9LpT4vBn8HcY3dWs6JgE1aZu5NqR0tVb3Kwxyz"
MASK = "*" * 24
ECHOES = {
    "openai masked": f"Incorrect API key provided: {KEY[:8]}{MASK}{KEY[-4:]}. You can find your API key at https://platform.openai.com/account/api-keys.",
    "first 8 and last 4": f"invalid key {KEY[:8]}...{KEY[-4:]}",
    "a middle run": f"the key containing {KEY[14:26]} was revoked",
    "whole key": f"key={KEY} rejected; Authorization: Bearer {KEY}",
}


def _leaks(text: str) -> list[str]:
    """Every fragment of KEY found in `text`."""
    found = [KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in text]
    found += re.findall(r"[*.\u2022\u2026]{3,}" + re.escape(KEY[-4:]), text)  # a masked tail
    return found


def test_the_redactor_removes_every_fragment_and_masked_echo():
    redactor = Redactor([KEY])
    for name, echo in ECHOES.items():
        clean = redactor.text(echo)
        assert not _leaks(clean), (name, clean)
        assert REDACTED in clean
        assert redactor.data(echo.encode()) == clean.encode()
    for i in range(len(KEY) - 7):  # every window, wherever it is cut from
        assert redactor.text(f"x {KEY[i : i + 8]} y") == f"x {REDACTED} y"
    # prose survives: the gateway's own messages, ellipses, the key's prefix alone
    for text in (
        "missing or invalid bearer token",
        "Loading... done",
        "an sk-proj key",
        '"provider":"claude"',
    ):
        assert redactor.text(text) == text


def test_a_word_inside_a_hand_made_token_is_not_redacted_everywhere():
    redactor = Redactor(["team-provider-token-2024"])
    assert redactor.text('{"provider":"claude"}') == '{"provider":"claude"}'
    assert redactor.text("token team-provider-token-2024 leaked") == f"token {REDACTED} leaked"
    assert redactor.text("cut: provider-token-20") == f"cut: {REDACTED}"


@pytest.mark.parametrize(
    ("model", "kind", "status", "echo"),
    [
        ("openai-chat", "openai_chat", 401, "openai masked"),
        ("mistral", "mistral", 401, "first 8 and last 4"),
        ("gemini", "gemini", 403, "a middle run"),
    ],
)
async def test_an_upstream_credential_refusal_reaches_the_client_in_the_gateways_words(
    model, kind, status, echo, restore_logging, caplog
):
    out = io.StringIO()
    caplog.set_level(logging.DEBUG)

    def no_retry(config: dict) -> None:
        config["models"][model]["retry"] = {"max_retries": 0}

    async with serving(no_retry, provider_key=KEY) as gateway:
        configure_logging("debug", secrets_redactor(gateway.config, {DEMO_KEY_ENV: KEY}), out)
        logging.getLogger().handlers.insert(0, caplog.handler)  # sees records before redaction
        upstream = gateway.hub.states[kind]
        upstream.push(Fault(status=status, message=ECHOES[echo]))
        got_status, headers, body = await gateway.chat({"model": model, "messages": USER})
        assert (
            len(upstream.requests) == 1 and upstream.rejections == []
        )  # the key was right: the fault answered
        assert got_status == 502
        error = orjson.loads(body)["error"]
        verb = "rejected the gateway's API key" if status == 401 else "refused the gateway's API key access"
        assert error["message"].startswith(f"provider {model!r} {verb} ({status})"), error
        assert "Incorrect API key" not in error["message"] and "revoked" not in error["message"]
        # a provider error in the middle of a stream quotes the key: the event is redacted
        gateway.hub.states["kimi"].push(
            Fault(after_events=3, mid_stream="error", message=ECHOES["whole key"], reply=Reply(text="x" * 60))
        )
        _, stream_headers, stream = await gateway.chat({"model": "kimi", "messages": USER, "stream": True})
        assert b'"error"' in stream
        _, _, metrics = await gateway.request("GET", "/metrics")
        await gateway.serves_normally()
    everything = {
        "body": body.decode(),
        "headers": orjson.dumps([headers, stream_headers]).decode(),
        "stream": stream.decode(),
        "metrics": metrics.decode(),
        "logs": out.getvalue(),
    }
    assert '"status":502' in everything["logs"]  # the logs were written
    for where, text in everything.items():
        assert not _leaks(text), (where, _leaks(text))
