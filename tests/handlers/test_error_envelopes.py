"""An error raised outside a handler (404, 405, 401, 413...) comes in the envelope of the dialect
that owns its path, as one its handler raises would: both are the dialect record's `error`, so the
registry's routes, prefixes and envelopes cannot drift apart."""

from __future__ import annotations

import orjson
import pytest

from gateway.http_errors import dialect_for, error_response
from gateway.ingress.dialects import DIALECTS
from gateway.ingress.errors import ClientError

ERRORS = [
    ClientError(400, "bad", param="messages", code="invalid_value"),
    ClientError(401, "who", type="authentication_error", code="invalid_api_key"),
    ClientError(404, "none", type="not_found_error", code="unknown_url"),
    ClientError(413, "big", code="body_too_large"),
]
ROUTES = [(dialect, route.path) for dialect in DIALECTS for route in dialect.routes]


@pytest.mark.parametrize(("dialect", "path"), ROUTES, ids=[path for _, path in ROUTES])
def test_every_ingress_route_has_its_dialects_envelope_outside_the_handler_too(dialect, path):
    assert dialect_for(path) is dialect, f"{path} is outside its own dialect's prefixes"
    for error in ERRORS:
        response = error_response(path, error)
        assert response.status == error.status
        assert response.body == dialect.error(error)[1]


def test_a_path_no_dialect_owns_answers_in_the_openai_envelope():
    response = error_response("/nowhere", ERRORS[2])
    assert dialect_for("/nowhere") is None
    assert orjson.loads(response.body) == ERRORS[2].body()


def test_no_two_dialects_claim_one_path_or_label():
    # one dialect served under two bases is two records (the Gemini API's /v1beta and /v1, each
    # with its own counting route and models list): the same label, the same envelope and codecs
    envelopes: dict[str, set[object]] = {}
    for dialect in DIALECTS:
        envelopes.setdefault(dialect.ingress, set()).add(dialect.error)
        for prefix in dialect.prefixes:
            below = prefix.rstrip("/") + "/x"
            assert dialect_for(below) is dialect, f"{below} is claimed by an earlier record"
    assert all(len(errors) == 1 for errors in envelopes.values()), envelopes
    assert len({d.ingress for d in DIALECTS}) == len({(d.ingress, d.error) for d in DIALECTS})
    paths = [route.path for _, route in ((d, r) for d in DIALECTS for r in d.routes)]
    assert len(set(paths)) == len(paths)
