"""Serialize continuity meta into one opaque string a stateless client can keep and send back.

The ingress codecs put sealed meta into client-visible fields (reasoning_details) without reading
the provider-private `data`, so no dialect ever learns a provider's token layout. A blob that does
not parse back is reported as None: the caller counts it and never forwards it blindly.
"""

from __future__ import annotations

import base64
import binascii

import orjson

from gateway.transcript.model import Continuity

_PREFIX = "gw1."


def seal(meta: Continuity) -> str:
    raw = orjson.dumps([meta.provider, meta.scope, meta.kind, meta.model, meta.data])
    return _PREFIX + base64.urlsafe_b64encode(raw).decode()


def unseal(blob: object) -> Continuity | None:
    if not isinstance(blob, str) or not blob.startswith(_PREFIX):
        return None
    try:
        provider, scope, kind, model, data = orjson.loads(base64.urlsafe_b64decode(blob[len(_PREFIX) :]))
    except (binascii.Error, ValueError, TypeError):
        return None
    if not all(isinstance(v, str) for v in (provider, scope, kind, model)) or not isinstance(data, dict):
        return None
    return Continuity(provider, scope, kind, model, data)
