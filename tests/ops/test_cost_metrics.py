"""Cost per request in the metrics and the access log: known prices counted in USD by provider and
model group, unknown ones counted as unknown (never as 0)."""

from __future__ import annotations

import orjson
import pytest

from tests.ops.conftest import USER, running_stack


def with_house_model(data):
    data["models"]["house"] = {"targets": [{"provider": "openai-chat", "model": "house-model-1"}]}
    data["models"]["negotiated"] = {"targets": [{"provider": "mistral", "model": "house-model-2"}]}
    data["providers"]["mistral"]["prices"] = {
        "house-model-2": {"input_per_mtok": 1000.0, "output_per_mtok": 2000.0}
    }


async def test_cost_by_provider_and_model_and_unknown_prices_counted_apart(caplog):
    caplog.set_level("INFO", logger="gateway.access")
    async with running_stack(with_house_model) as stack:
        for model in ("claude", "house", "negotiated"):
            status, _, body = await stack.chat({"model": model, "messages": USER})
            assert status == 200, body
        sample = stack.metrics.registry.get_sample_value
        lines = [orjson.loads(r.getMessage()) for r in caplog.records if r.name == "gateway.access"]
        claude, house, negotiated = lines

        assert claude["cost_usd"] > 0
        assert sample("gateway_cost_usd_total", {"provider": "claude", "model": "claude"}) == pytest.approx(
            claude["cost_usd"]
        )
        assert house["cost_usd"] is None and house["usage"]["input"] > 0
        assert sample("gateway_cost_unknown_total", {"provider": "openai-chat", "model": "house"}) == 1
        assert sample("gateway_cost_usd_total", {"provider": "openai-chat", "model": "house"}) is None

        usage = negotiated["usage"]
        expected = (usage["input"] * 1000.0 + usage["output"] * 2000.0) / 1e6
        assert negotiated["cost_usd"] == pytest.approx(expected)
        assert sample(
            "gateway_cost_usd_total", {"provider": "mistral", "model": "negotiated"}
        ) == pytest.approx(expected)
