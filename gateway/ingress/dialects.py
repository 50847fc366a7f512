"""The client dialects the gateway speaks: the one list of them. A dialect is one record
(`ingress.base.Dialect`: its routes and codecs, `ingress` label, error envelope and
models-list shape) in its own package; adding one is that package plus one line here (README
"Architecture"). The app's routes, the errors answered outside a handler and the exchange all
derive from this list."""

from __future__ import annotations

from gateway.ingress.base import Dialect
from gateway.ingress.chat import codec as chat
from gateway.ingress.gemini import codec as gemini
from gateway.ingress.messages import codec as messages
from gateway.ingress.responses import codec as responses

DIALECTS: tuple[Dialect, ...] = (
    chat.DIALECT,
    messages.DIALECT,
    responses.DIALECT,
    gemini.V1BETA,
    gemini.V1,
)
