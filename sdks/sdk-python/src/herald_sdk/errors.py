"""Typed errors: every non-2xx answer is a HeraldError subclass chosen by the status.

Branch on the class (or ``status``) and on ``code``, never on the message.
"""

from __future__ import annotations

from typing import Any


class HeraldError(Exception):
    """An error answer. ``status`` is 0 when no answer arrived (RequestTimeoutError, APIConnectionError)."""

    status: int
    #: The body's machine-readable ``code``, when it has one (a 429 beyond 25 pending asks has none).
    code: str | None
    #: The parsed body, or ``{"error": <text>}`` for a body that is not JSON.
    body: dict[str, Any]
    #: Seconds to wait, from ``Retry-After``, when the answer had one.
    retry_after: int | None

    def __init__(self, status: int, body: dict[str, Any], retry_after: int | None = None) -> None:
        message = body.get("message") or body.get("error") or f"HTTP {status}"
        super().__init__(str(message))
        self.status = status
        code = body.get("code")
        self.code = code if isinstance(code, str) else None
        self.body = body
        self.retry_after = retry_after

    @property
    def message(self) -> str:
        return str(self.args[0])


class ValidationError(HeraldError):
    """400 ``invalid_request``; ``fields`` names each bad field."""

    @property
    def fields(self) -> list[dict[str, str]]:
        fields = self.body.get("fields")
        return fields if isinstance(fields, list) else []


class AuthenticationError(HeraldError):
    """401: a missing, malformed, unknown, revoked or expired key."""


class PermissionError(HeraldError):  # noqa: A001 - the name the other SDKs use
    """403: the key's origin or the plan does not allow it (``code`` says which)."""


class NotFoundError(HeraldError):
    """404."""


class ConflictError(HeraldError):
    """409: already answered, an idempotency key reused for another request, an unreachable person."""


class GoneError(HeraldError):
    """410: e.g. an expired enrollment link."""


class RateLimitError(HeraldError):
    """429: ``retry_after`` says when to try again (absent beyond 25 pending asks)."""


class ServerError(HeraldError):
    """5xx."""


class RequestTimeoutError(HeraldError):
    """The request's time-out passed before an answer came."""


class APIConnectionError(HeraldError):
    """No HTTP answer at all (refused connection, DNS failure, reset)."""


class WebhookVerificationError(Exception):
    """No signature matches, the timestamp is outside the tolerance, or a header is missing."""


_BY_STATUS: dict[int, type[HeraldError]] = {
    400: ValidationError,
    401: AuthenticationError,
    403: PermissionError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    429: RateLimitError,
}


def error_for(status: int, body: dict[str, Any], retry_after: int | None = None) -> HeraldError:
    error_class = _BY_STATUS.get(status) or (ServerError if status >= 500 else HeraldError)
    return error_class(status, body, retry_after)
