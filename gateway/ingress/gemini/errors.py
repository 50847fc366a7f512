"""Google's error envelope: `{"error": {"code", "message", "status", "details"}}`. The SDKs read
`status` (google-genai shows it beside the message) and Gemini CLI reads `RetryInfo` on a 429."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.ingress.errors import ClientError

# HTTP status -> google.rpc.Code name (https://cloud.google.com/apis/design/errors#error_codes);
# a status Google does not use takes the name of its class
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
DOMAIN = "llm-transcript-gateway"


def status_name(status: int) -> str:
    return STATUS_NAMES.get(status) or ("INTERNAL" if status >= 500 else "FAILED_PRECONDITION")


def error_json(
    status: int, message: str, code: str | None = None, retry_after: str | None = None
) -> dict[str, Any]:
    details: list[dict[str, Any]] = []
    if code:  # the gateway's own reason, as Google puts its reasons in an ErrorInfo
        details.append({"@type": ERROR_INFO, "reason": code.upper(), "domain": DOMAIN})
    if retry_after is not None:
        details.append({"@type": RETRY_INFO, "retryDelay": f"{retry_after}s"})
    return {"error": {"code": status, "message": message, "status": status_name(status), "details": details}}


def google_error(exc: ClientError) -> tuple[int, bytes]:
    retry = exc.headers.get("Retry-After") if exc.status in (429, 503) else None
    return exc.status, orjson.dumps(error_json(exc.status, exc.message, exc.code, retry))
