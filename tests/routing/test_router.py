"""Strategies: failover order, round-robin rotation and weighted choice, over 1,000 plans."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from gateway.config import config_from_dict
from gateway.routing.router import Router, UnknownModel

N = 1000


def config(strategy: str, weights: tuple[float, ...] = (1.0, 1.0, 1.0), **group):
    providers = {
        name: {"kind": "openai_chat", "base_url": f"http://127.0.0.1:1/{name}", "api_key_env": "K"}
        for name in ("a", "b", "c")
    }
    targets = [{"provider": p, "model": "m", "weight": w} for p, w in zip("abc", weights, strict=True)]
    return config_from_dict(
        {"providers": providers, "models": {"g": {"strategy": strategy, "targets": targets, **group}}}
    )


def firsts(router: Router, n: int = N) -> Counter[str]:
    return Counter(router.plan("g").targets[0].provider for _ in range(n))


def test_failover_always_tries_in_config_order():
    router = Router(config("failover"))
    orders = {tuple(t.provider for t in router.plan("g").targets) for _ in range(N)}
    assert orders == {("a", "b", "c")}


def test_round_robin_rotates_exactly_and_keeps_every_target_as_a_fallback():
    router = Router(config("round_robin"))
    plans = [tuple(t.provider for t in router.plan("g").targets) for _ in range(N)]
    assert plans[:4] == [("a", "b", "c"), ("b", "c", "a"), ("c", "a", "b"), ("a", "b", "c")]
    counts = Counter(p[0] for p in plans)
    # tolerance: exact up to the remainder of N / 3
    assert max(counts.values()) - min(counts.values()) <= 1 and sum(counts.values()) == N


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_weighted_choice_follows_the_weights(seed):
    router = Router(config("weighted", (1.0, 3.0, 6.0)), rng=random.Random(seed))
    counts = firsts(router)
    # expected 100 / 300 / 600, tolerance +-4% of N (40): 2.5 to 4 standard deviations of each
    # share, far below what a wrong strategy (uniform, first-only, inverted) would produce
    for name, share in (("a", 0.1), ("b", 0.3), ("c", 0.6)):
        assert abs(counts[name] - share * N) <= 0.04 * N, counts


def test_weighted_fallbacks_are_ordered_by_weight_too():
    router = Router(config("weighted", (1.0, 1.0, 8.0)), rng=random.Random(5))
    seconds = Counter()
    for _ in range(N):
        targets = router.plan("g").targets
        assert sorted(t.provider for t in targets) == ["a", "b", "c"], "every target stays a fallback"
        if targets[0].provider == "c":
            seconds[targets[1].provider] += 1
    # behind the heavy favourite, the two light targets share the second place evenly
    assert abs(seconds["a"] - seconds["b"]) <= 0.1 * sum(seconds.values())


def test_plans_carry_the_groups_routing_options():
    router = Router(
        config(
            "failover",
            affinity="issuer",
            retry={"max_retries": 4, "deadline_seconds": 9.0},
            timeouts={"first_token_seconds": 3.0},
        )
    )
    plan = router.plan("g")
    assert plan.affinity and plan.retry.max_retries == 4 and plan.retry.deadline_seconds == 9.0
    assert plan.timeouts.first_token_seconds == 3.0 and plan.timeouts.idle_seconds is None


def test_direct_addressing_and_unknown_models():
    router = Router(config("failover"))
    plan = router.plan("b/some-model")
    assert plan.model == "b" and [(t.provider, t.model) for t in plan.targets] == [("b", "some-model")]
    assert not plan.affinity and plan.retry.max_retries == 2
    for bad in ("nope", "z/m", "b/"):
        with pytest.raises(UnknownModel):
            router.plan(bad)


@pytest.mark.parametrize(
    "kind,good,bad",
    [
        (
            "openai_chat",
            ["gpt-4.1", "meta-llama/Llama-3.3-70B", "ft:gpt-4.1:org::x1"],
            ["a b", "-x", "x" * 257],
        ),
        ("gemini", ["gemini-2.5-pro", "models/gemini-2.5-pro"], ["../v1/files", "g:generateContent", "a/b"]),
        ("anthropic", ["claude-sonnet-4-5"], ["claude/x", "claude:x", "c\n"]),
        ("deepseek", ["deepseek-reasoner"], ["d" * 65, "deepseek chat"]),
    ],
)
def test_a_direct_address_names_a_model_of_the_providers_family(kind, good, bad):
    from gateway.routing.router import InvalidModelName

    providers = {"p": {"kind": kind, "base_url": "http://127.0.0.1:1", "api_key_env": "K"}}
    router = Router(config_from_dict({"providers": providers}))
    for name in good:
        assert router.plan(f"p/{name}").targets[0].model == name
    for name in bad:
        with pytest.raises(InvalidModelName) as info:
            router.plan(f"p/{name}")
        assert len(str(info.value)) < 200
    with pytest.raises(InvalidModelName, match="longer than 512"):
        router.plan("p/" + "m" * 10_000_000)
