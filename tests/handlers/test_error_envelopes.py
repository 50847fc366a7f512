"""An error raised outside a handler (404, 405, 401, 413...) and one a codec renders for the same
path come in the same envelope: the path registry of gateway/http_errors.py and the ingress
routes' codecs must not drift apart."""

from __future__ import annotations

import pytest

from gateway.app import INGRESS_ROUTES
from gateway.http_errors import dialect_for
from gateway.ingress.errors import ClientError

ERRORS = [
    ClientError(400, "bad", param="messages", code="invalid_value"),
    ClientError(401, "who", type="authentication_error", code="invalid_api_key"),
    ClientError(404, "none", type="not_found_error", code="unknown_url"),
    ClientError(413, "big", code="body_too_large"),
]


@pytest.mark.parametrize("path", sorted(INGRESS_ROUTES))
def test_every_ingress_route_has_its_codecs_envelope_outside_the_handler_too(path):
    codec = INGRESS_ROUTES[path]
    dialect = dialect_for(path)
    assert dialect is not None, f"{path} is missing from http_errors.DIALECTS"
    assert dialect.ingress == codec.ingress
    for error in ERRORS:
        assert dialect.error_body(error) == codec.error_body(error)[1]
