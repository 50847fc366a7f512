"""How an attempt's failure steers the attempt loop (gateway/routing/engine.py): fail over and
retry after a backoff, fail over only, repair strictly and send once more, or tell the client at
once; and what the loop raises once no target served the request."""

from __future__ import annotations

import enum

from gateway.routing.answer import Attempt
from gateway.transcript.events import ErrorCategory, UpstreamError


class Failure(enum.Enum):
    RETRY = "retry"  # the target may serve a little later: fail over now, retry after a backoff
    NEXT = "next"  # this target cannot serve this request, another may: fail over, no retry
    REJECTED = "rejected"  # a continuity / pairing 400: repair strictly, same target once more
    FINAL = "final"  # the request itself is at fault: the client gets the error at once


# not retryable on the same target, but another target may well serve the request. 401/403/404
# are final as the routing issue specifies (the client sees them at once; 401/403 still take the
# target out of service, so the next request goes elsewhere); quota and a broken upstream answer
# say nothing about the request, so the next target is tried.
_NEXT_TARGET_CATEGORIES = frozenset({ErrorCategory.QUOTA, ErrorCategory.PROTOCOL})
# failures that happened before any provider saw the request: another target may serve it
_NEXT_TARGET_TYPES = frozenset({"encode_error", "missing_api_key"})
_REJECTION_CATEGORIES = frozenset({ErrorCategory.CONTINUITY, ErrorCategory.PAIRING})


def failure_class(error: UpstreamError) -> Failure:
    if error.retryable:
        return Failure.RETRY
    if error.category in _NEXT_TARGET_CATEGORIES or error.type in _NEXT_TARGET_TYPES:
        return Failure.NEXT
    if error.category in _REJECTION_CATEGORIES:
        return Failure.REJECTED
    return Failure.FINAL


class AllTargetsFailed(Exception):
    def __init__(self, attempts: list[Attempt], final: UpstreamError) -> None:
        super().__init__(final.message)
        self.attempts = attempts
        self.final = final
