"""Serialize continuity meta into one opaque, authenticated string a stateless client can keep
and send back.

The ingress codecs put sealed meta into client-visible fields (reasoning_details) without reading
the provider-private `data`, so no dialect ever learns a provider's token layout. The blob carries
an HMAC under the deployment's secret: a client cannot invent an issuer, a scope or provider data
(it could otherwise make the gateway send arbitrary values to a provider). A blob that does not
verify is reported as None: the caller counts it and never forwards it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

import orjson

from gateway.transcript.model import Continuity

_PREFIX = "gw1."
_MAC_BYTES = 16


class Sealer:
    PREFIX = _PREFIX  # every sealed blob starts with it

    def __init__(self, key: bytes | None = None) -> None:
        # without a configured secret, blobs are valid for this process only (the store still
        # restores continuity; stateless clients lose their tokens across restarts)
        self._key = key or secrets.token_bytes(32)

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:_MAC_BYTES]

    def seal(self, meta: Continuity) -> str:
        payload = orjson.dumps([meta.provider, meta.scope, meta.kind, meta.model, meta.data])
        blob = base64.urlsafe_b64encode(self._mac(payload) + payload).decode()
        return _PREFIX + blob

    def unseal(self, blob: object) -> Continuity | None:
        if not isinstance(blob, str) or not blob.startswith(_PREFIX):
            return None
        try:
            raw = base64.urlsafe_b64decode(blob[len(_PREFIX) :])
        except (binascii.Error, ValueError):
            return None
        mac, payload = raw[:_MAC_BYTES], raw[_MAC_BYTES:]
        if not hmac.compare_digest(mac, self._mac(payload)):
            return None
        try:
            provider, scope, kind, model, data = orjson.loads(payload)
        except (ValueError, TypeError):
            return None
        if not all(isinstance(v, str) for v in (provider, scope, kind, model)) or not isinstance(data, dict):
            return None
        return Continuity(provider, scope, kind, model, data)
