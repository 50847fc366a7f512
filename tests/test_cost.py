"""Cost per answer: the price database for known models, config overrides for the rest, and an
unknown price as None (never 0)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.config import config_from_dict
from gateway.cost import PRICE_PROVIDERS, PriceBook, direct_pricer, genai_prices_pricer, library_pricer
from gateway.transcript.model import Usage


def config(prices=None, kind="anthropic", model="claude-sonnet-4-5"):
    provider = {"kind": kind, "base_url": "https://example.test", "api_key_env": "K"}
    if prices is not None:
        provider["prices"] = prices
    return config_from_dict(
        {"providers": {"p": provider}, "models": {"g": {"targets": [{"provider": "p", "model": model}]}}}
    )


def test_cache_reads_and_writes_are_priced_as_anthropic_prices_them():
    book = PriceBook(config())
    # claude-sonnet-4-5: $3 input, $15 output, $0.30 cache read, $3.75 cache write per million
    usage = Usage(input_tokens=1000, output_tokens=100, cache_read_tokens=500, cache_write_tokens=100)
    expected = (400 * 3 + 500 * 0.3 + 100 * 3.75 + 100 * 15) / 1e6
    assert book.cost("p", "claude-sonnet-4-5", usage) == pytest.approx(expected)


def test_reasoning_is_output_and_every_family_is_known_to_the_database():
    for kind, model in [
        ("openai_responses", "gpt-5.1"),
        ("openai_chat", "gpt-4.1"),
        ("gemini", "gemini-3-pro-preview"),
        ("mistral", "magistral-medium-latest"),
        ("kimi", "kimi-k2-thinking"),
        ("deepseek", "deepseek-reasoner"),
    ]:
        book = PriceBook(config(kind=kind, model=model))
        plain = book.cost("p", model, Usage(input_tokens=1000, output_tokens=500))
        reasoned = book.cost("p", model, Usage(input_tokens=1000, output_tokens=500, reasoning_tokens=400))
        assert plain and plain > 0, (kind, model)
        assert reasoned == pytest.approx(plain), "reasoning tokens are output tokens, at the output price"


def test_a_configured_price_wins_and_fills_cache_and_reasoning_defaults():
    book = PriceBook(config({"claude-sonnet-4-5": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}))
    usage = Usage(input_tokens=1000, output_tokens=100, cache_read_tokens=200, reasoning_tokens=50)
    assert book.cost("p", "claude-sonnet-4-5", usage) == pytest.approx((1000 * 1.0 + 100 * 2.0) / 1e6)
    book = PriceBook(
        config(
            {
                "my-model": {
                    "input_per_mtok": 1.0,
                    "output_per_mtok": 2.0,
                    "cache_read_per_mtok": 0.1,
                    "cache_write_per_mtok": 1.25,
                    "reasoning_per_mtok": 4.0,
                }
            },
            model="my-model",
        )
    )
    usage = Usage(
        input_tokens=1000,
        output_tokens=100,
        cache_read_tokens=200,
        cache_write_tokens=100,
        reasoning_tokens=50,
    )
    expected = (700 * 1.0 + 200 * 0.1 + 100 * 1.25 + 50 * 2.0 + 50 * 4.0) / 1e6
    assert book.cost("p", "my-model", usage) == pytest.approx(expected)


def test_an_unknown_model_or_provider_has_no_price_and_is_looked_up_once():
    calls = []

    def database(provider_id, model, when):
        calls.append((provider_id, model))
        return None

    book = PriceBook(config(model="house-model"), database=database)
    assert book.cost("p", "house-model", Usage(input_tokens=10, output_tokens=1)) is None
    assert book.cost("p", "house-model", Usage(input_tokens=10, output_tokens=1)) is None
    assert calls == [("anthropic", "house-model")]
    assert book.cost("not-configured", "x", Usage(input_tokens=1)) is None
    assert genai_prices_pricer("anthropic", "no-such-model-anywhere", None) is None


def test_a_price_is_looked_up_again_after_an_hour():
    now = [0.0]
    seen = []

    def database(provider_id, model, when):
        seen.append(model)
        return lambda usage: Decimal(1)

    book = PriceBook(config(), database=database, clock=lambda: now[0])
    book.cost("p", "claude-sonnet-4-5", Usage())
    now[0] = 1800
    book.cost("p", "claude-sonnet-4-5", Usage())
    now[0] = 3700
    book.cost("p", "claude-sonnet-4-5", Usage())
    assert len(seen) == 2


def test_a_broken_database_is_an_unknown_price_not_a_failed_request():
    def database(provider_id, model, when):
        raise RuntimeError("boom")

    book = PriceBook(config(), database=database)
    assert book.cost("p", "claude-sonnet-4-5", Usage(input_tokens=1)) is None


def _database_prices():
    from datetime import UTC, datetime

    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    now = datetime.now(UTC)
    out = []
    for provider_id in sorted(set(PRICE_PROVIDERS.values())):
        provider = snapshot.find_provider(None, provider_id, None)
        out.extend((f"{provider_id}/{m.id}", m.get_prices(now)) for m in provider.models)
    return out


PRICES = _database_prices()


@st.composite
def usages(draw):
    inp = draw(st.integers(0, 2_000_000))
    read = draw(st.integers(0, inp))
    write = draw(st.integers(0, inp - read))
    out = draw(st.integers(0, 200_000))
    return Usage(inp, out, read, write, draw(st.integers(0, out)))


@settings(max_examples=40, deadline=None)
@given(usage=usages(), index=st.integers(0, len(PRICES) - 1))
def test_the_direct_sum_prices_exactly_as_genai_prices_wherever_it_is_used(usage, index):
    name, price = PRICES[index]
    direct = direct_pricer(price)
    if direct is None:
        return  # the library itself prices this model
    expected = library_pricer(price)(usage)
    assert float(direct(usage)) == pytest.approx(float(expected), rel=1e-9, abs=1e-12), name


def test_nearly_every_model_of_the_six_families_takes_the_direct_sum():
    direct = [name for name, price in PRICES if direct_pricer(price) is not None]
    assert len(PRICES) > 100 and len(direct) / len(PRICES) > 0.9
    book = PriceBook(config())
    assert book.pricer("p", "claude-sonnet-4-5").__name__ == "cost", "a direct sum, not the library"
