"""The family records (gateway/providers/__init__.py): each one tells the truth about its adapter,
and the simulators, judged independently, agree with them on kinds and paths."""

from __future__ import annotations

import pytest

from gateway.config import PROVIDER_KINDS
from gateway.headers import UPSTREAM_REQUEST_HEADERS
from gateway.providers import FAMILIES, KINDS, get_adapter
from gateway.simulators import base as simulators
from gateway.transcript.model import Message, Request, Role, Text
from tests.property.transcripts import MODELS, target_for

KEY = "sk-family-test-key"


def test_every_place_that_lists_kinds_takes_the_registry():
    assert tuple(FAMILIES) == KINDS == PROVIDER_KINDS
    assert all(family.kind == kind for kind, family in FAMILIES.items())


def test_the_simulators_serve_every_family_at_its_recorded_path():
    assert set(simulators.KINDS) == set(KINDS)
    assert {kind: f.simulator_path for kind, f in FAMILIES.items()} == simulators.BASE_PATHS


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_a_call_carries_only_the_headers_its_record_names_and_the_key_where_it_says(kind, stream):
    family = FAMILIES[kind]
    request = Request(MODELS[kind], (Message(Role.USER, (Text("hi"),)),), max_tokens=64, stream=stream)
    http = get_adapter(kind).encode_request(request, target_for(kind), KEY)
    names = {name.lower() for name in http.headers}
    assert names <= family.upstream_headers() <= UPSTREAM_REQUEST_HEADERS
    credential = {name.lower(): value for name, value in http.headers.items()}[family.credential_header]
    assert credential == (f"Bearer {KEY}" if family.credential_header == "authorization" else KEY)


@pytest.mark.parametrize("kind", [kind for kind, family in FAMILIES.items() if family.key_echo is not None])
def test_a_key_its_errors_quote_is_masked_as_its_record_says(kind):
    echo = FAMILIES[kind].key_echo
    assert echo is not None
    key = echo.mask.replace("*", "") + "api03-SECRETsecret1234_abc-123"
    assert echo.pattern.fullmatch(key)
    for body in (
        f"proxy error for key {key}".encode(),
        f'{{"error": {{"message": "bad key {key}"}}}}'.encode(),
    ):
        message = get_adapter(kind).classify_error(401, {}, body).message
        assert "SECRET" not in message and echo.mask in message
    assert echo.redact(f"a {key} b {key}") == f"a {echo.mask} b {echo.mask}"


def test_join_url_makes_each_url_once_within_a_bound(monkeypatch):
    from gateway.bounded_cache import BoundedCache
    from gateway.providers import base

    monkeypatch.setattr(base, "_URLS", BoundedCache(3))
    first = base.join_url("http://h:1/v1/", "/chat/completions")
    assert first == "http://h:1/v1/chat/completions"
    assert base.join_url("http://h:1/v1/", "/chat/completions") is first  # the same string again
    assert base.join_url("http://h:1/v1", "/chat/completions") == first
    for n in range(5):  # client-chosen model names in the path: the memo stays within its bound
        assert base.join_url("http://h:1/v1beta/models/", f"/m{n}:generateContent").endswith(
            f"/m{n}:generateContent"
        )
        assert len(base._URLS) <= 3
