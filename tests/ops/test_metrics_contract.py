"""The metrics contract (DESIGN.md section 2): after real traffic - successes, a repair, a
failover, an unknown model, a refused request - /metrics parses with prometheus_client's own
parser and holds every contract metric with exactly its label keys and the expected values."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families

from gateway.metrics import LATENCY_BUCKETS, TTFT_BUCKETS, Metrics, RequestRecord, new_request_id
from gateway.simulators.base import Fault, Reply, ToolCallSpec
from tests.ops.conftest import USER

# name -> (type, label keys): the contract table, written out independently of gateway/metrics.py
CONTRACT = {
    "gateway_requests_total": ("counter", {"ingress", "model", "provider", "outcome"}),
    "gateway_request_duration_seconds": ("histogram", {"ingress", "model", "provider"}),
    "gateway_time_to_first_token_seconds": ("histogram", {"model", "provider"}),
    "gateway_upstream_attempts_total": ("counter", {"provider", "outcome"}),
    "gateway_failovers_total": ("counter", {"model", "from_provider", "to_provider", "reason"}),
    "gateway_repairs_total": ("counter", {"provider", "kind"}),
    "gateway_tokens_total": ("counter", {"provider", "model", "type"}),
    "gateway_store_operations_total": ("counter", {"backend", "op", "outcome"}),
    "gateway_worker_restarts_total": ("counter", set()),
    "gateway_inflight_requests": ("gauge", set()),
    "gateway_target_available": ("gauge", {"model", "provider"}),
    "gateway_cost_usd_total": ("counter", {"provider", "model"}),
}
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum", "_created")
COUNTER_SUFFIXES = ("_total", "_created")


def scrape(text: str) -> dict[str, tuple[str, list]]:
    """Family name (as the contract spells it) -> (type, samples)."""
    out = {}
    for family in text_string_to_metric_families(text):
        name = family.name + "_total" if family.type == "counter" else family.name
        out[name] = (family.type, family.samples)
    return out


def values(samples: list, sample_name: str) -> dict[tuple[tuple[str, str], ...], float]:
    out: dict[tuple[tuple[str, str], ...], float] = defaultdict(float)
    for s in samples:
        if s.name == sample_name:
            out[tuple(sorted(s.labels.items()))] += s.value
    return out


def tool_history() -> list[dict]:
    """A finished tool round trip with a canonical id: projected for Mistral's 9-char ids."""
    call = {
        "id": "call_Q2xpZW50SWQwMTIzNDU2Nzg",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    return [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "sunny"},
    ]


async def test_scrape_after_traffic_holds_the_whole_contract(stack):
    hub = stack.hub
    hub.states["anthropic"].push(Reply(text="Forty-two.", reasoning="6*7"))
    status, _, _ = await stack.chat({"model": "claude", "messages": USER})
    assert status == 200
    hub.states["openai_chat"].push(Reply(text="Forty-two."))
    status, _, _ = await stack.chat(
        {"model": "openai-chat", "messages": USER, "stream": True, "stream_options": {"include_usage": True}}
    )
    assert status == 200
    # a repair: the canonical tool-call id is projected to Mistral's format
    hub.states["mistral"].push(Reply(text="Sunny in Paris."))
    status, headers, _ = await stack.chat({"model": "mistral", "messages": tool_history()})
    assert status == 200 and "tool_id_projected=1" in headers["X-Gateway-Repairs"]
    # a failover: Anthropic is overloaded, Gemini answers
    hub.states["anthropic"].push(Fault(status=529))
    hub.states["gemini"].push(
        Reply(text="Forty-two.", tool_calls=[ToolCallSpec("get_time", {"city": "Oslo"})])
    )
    status, headers, _ = await stack.chat({"model": "smart", "messages": USER})
    assert status == 200 and headers["X-Gateway-Provider"] == "gemini"
    # an unknown model and a direct <provider>/<model> address
    status, _, _ = await stack.chat({"model": "no-such-model", "messages": USER})
    assert status == 404
    hub.states["deepseek"].push(Reply(text="Forty-two."))
    status, _, _ = await stack.chat({"model": "deepseek/deepseek-chat", "messages": USER})
    assert status == 200

    # the answered turns are recorded in the continuity store in the background
    for _ in range(200):
        status, _, body = await stack.get("/metrics")
        if b'gateway_store_operations_total{backend="memory",op="put",outcome="ok"}' in body:
            break
        await asyncio.sleep(0.02)
    assert status == 200
    families = scrape(body.decode())

    for name, (kind, labels) in CONTRACT.items():
        assert name in families, f"{name} missing from /metrics"
        found_kind, samples = families[name]
        assert found_kind == kind, name
        assert samples, f"{name} has no samples after traffic"
        for sample in samples:
            keys = set(sample.labels) - ({"le"} if sample.name.endswith("_bucket") else set())
            assert keys == labels, (sample.name, sample.labels)

    requests = values(families["gateway_requests_total"][1], "gateway_requests_total")
    ok = "ingress", "chat_completions"
    assert requests[(ok, ("model", "claude"), ("outcome", "ok"), ("provider", "claude"))] == 1
    assert requests[(ok, ("model", "smart"), ("outcome", "ok"), ("provider", "gemini"))] == 1
    assert requests[(ok, ("model", "deepseek"), ("outcome", "ok"), ("provider", "deepseek"))] == 1
    assert requests[(ok, ("model", "unknown"), ("outcome", "client_error"), ("provider", "none"))] == 1
    assert sum(requests.values()) == 6

    failovers = values(families["gateway_failovers_total"][1], "gateway_failovers_total")
    assert dict(failovers) == {
        (
            ("from_provider", "claude"),
            ("model", "smart"),
            ("reason", "overloaded"),
            ("to_provider", "gemini"),
        ): 1
    }
    attempts = values(families["gateway_upstream_attempts_total"][1], "gateway_upstream_attempts_total")
    assert attempts[(("outcome", "overloaded"), ("provider", "claude"))] == 1
    assert attempts[(("outcome", "ok"), ("provider", "gemini"))] == 1

    repairs = values(families["gateway_repairs_total"][1], "gateway_repairs_total")
    assert repairs[(("kind", "tool_id_projected"), ("provider", "mistral"))] == 1

    tokens = values(families["gateway_tokens_total"][1], "gateway_tokens_total")
    for provider in ("claude", "openai-chat", "mistral", "gemini", "deepseek"):
        for kind in ("input", "output"):
            assert (
                tokens[
                    (
                        ("model", provider if provider != "gemini" else "smart"),
                        ("provider", provider),
                        ("type", kind),
                    )
                ]
                > 0
            )

    ttft = families["gateway_time_to_first_token_seconds"][1]
    buckets = sorted(
        {float(s.labels["le"]) for s in ttft if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"}
    )
    assert buckets == list(TTFT_BUCKETS) and buckets[0] == 0.05 and buckets[-1] == 60
    counts = values(ttft, "gateway_time_to_first_token_seconds_count")
    assert counts[(("model", "claude"), ("provider", "claude"))] == 1
    assert counts[(("model", "openai-chat"), ("provider", "openai-chat"))] == 1

    duration = families["gateway_request_duration_seconds"][1]
    assert max(float(s.labels["le"]) for s in duration if s.labels.get("le", "+Inf") != "+Inf") == max(
        LATENCY_BUCKETS
    )
    assert sum(values(duration, "gateway_request_duration_seconds_count").values()) == 6

    inflight = values(families["gateway_inflight_requests"][1], "gateway_inflight_requests")
    assert dict(inflight) == {(): 0}
    available = values(families["gateway_target_available"][1], "gateway_target_available")
    assert available[(("model", "smart"), ("provider", "claude"))] == 1
    assert available[(("model", "smart"), ("provider", "gemini"))] == 1

    store = values(families["gateway_store_operations_total"][1], "gateway_store_operations_total")
    assert store[(("backend", "memory"), ("op", "put"), ("outcome", "ok"))] >= 1


async def test_client_chosen_model_names_never_become_label_values(stack):
    for n in range(12):
        status, _, _ = await stack.chat({"model": f"made-up-{n}", "messages": USER})
        assert status == 404
    _, _, body = await stack.get("/metrics")
    text = body.decode()
    assert "made-up" not in text
    requests = values(scrape(text)["gateway_requests_total"][1], "gateway_requests_total")
    assert dict(requests) == {
        (
            ("ingress", "chat_completions"),
            ("model", "unknown"),
            ("outcome", "client_error"),
            ("provider", "none"),
        ): 12
    }


def test_a_record_with_names_outside_the_config_collapses_to_one_series():
    metrics = Metrics()
    metrics.bind(["smart", "claude"], ["claude"])
    for n in range(5):
        metrics.record(
            RequestRecord("chat_completions", model=f"raw-{n}", provider=f"evil-{n}", outcome="ok")
        )
    metrics.record(RequestRecord("chat_completions", model="smart", provider="claude"))
    requests = values(
        scrape(metrics.render().decode())["gateway_requests_total"][1], "gateway_requests_total"
    )
    assert dict(requests) == {
        (("ingress", "chat_completions"), ("model", "unknown"), ("outcome", "ok"), ("provider", "none")): 5,
        (("ingress", "chat_completions"), ("model", "smart"), ("outcome", "ok"), ("provider", "claude")): 1,
    }


def test_a_retry_on_the_same_provider_is_not_a_failover():
    from gateway.metrics import AttemptOutcome

    metrics = Metrics()
    metrics.record(
        RequestRecord(
            "chat_completions",
            model="smart",
            provider="gemini",
            attempts=[
                AttemptOutcome("claude", "continuity"),
                AttemptOutcome("claude", "rate_limit"),
                AttemptOutcome("gemini", "ok"),
            ],
        )
    )
    families = scrape(metrics.render().decode())
    failovers = values(families["gateway_failovers_total"][1], "gateway_failovers_total")
    assert dict(failovers) == {
        (
            ("from_provider", "claude"),
            ("model", "smart"),
            ("reason", "rate_limit"),
            ("to_provider", "gemini"),
        ): 1
    }
    attempts = values(families["gateway_upstream_attempts_total"][1], "gateway_upstream_attempts_total")
    assert sum(attempts.values()) == 3


def test_target_availability_is_read_from_routing_at_scrape_time():
    metrics = Metrics()
    metrics.bind(["smart"], ["claude", "gemini"])
    circuit_open = {"claude": False, "gemini": False}
    metrics.watch_targets(
        ("smart", provider, lambda p=provider: 0.0 if circuit_open[p] else 1.0) for provider in circuit_open
    )

    def available() -> dict:
        return dict(
            values(
                scrape(metrics.render().decode())["gateway_target_available"][1], "gateway_target_available"
            )
        )

    assert available() == {
        (("model", "smart"), ("provider", "claude")): 1,
        (("model", "smart"), ("provider", "gemini")): 1,
    }
    circuit_open["claude"] = True
    assert available() == {
        (("model", "smart"), ("provider", "claude")): 0,
        (("model", "smart"), ("provider", "gemini")): 1,
    }


async def test_a_target_taken_out_of_service_shows_as_unavailable(stack):
    stack.hub.states["anthropic"].push(Fault(status=401))  # a revoked key: out of service
    stack.hub.states["gemini"].push(Reply(text="Forty-two."))
    status, _, _ = await stack.chat({"model": "smart", "messages": USER})
    assert status == 502, "an upstream 401 is final: the gateway's key is broken, not the client's request"
    status, headers, _ = await stack.chat({"model": "smart", "messages": USER})
    assert status == 200 and headers["X-Gateway-Provider"] == "gemini"
    _, _, body = await stack.get("/metrics")
    available = values(scrape(body.decode())["gateway_target_available"][1], "gateway_target_available")
    assert available[(("model", "smart"), ("provider", "claude"))] == 0
    assert available[(("model", "smart"), ("provider", "gemini"))] == 1
    assert available[(("model", "claude"), ("provider", "claude"))] == 0  # the same target in another group


def test_request_ids_are_random_version_4_uuids():
    ids = [new_request_id() for _ in range(200)]
    assert len(set(ids)) == len(ids)
    for value in ids:
        parsed = uuid.UUID(hex=value)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122) and parsed.hex == value
