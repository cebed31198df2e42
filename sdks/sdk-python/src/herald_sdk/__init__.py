"""Herald's server SDK for Python: a typed client for /api/v1/server on the standard library.

Requests never retry on their own; errors are HeraldError subclasses by status. The request and
response shapes (TypedDicts) are in herald_sdk.types.
"""

from .client import MAX_WAIT_SECONDS, Herald
from .errors import (
    APIConnectionError,
    AuthenticationError,
    ConflictError,
    GoneError,
    HeraldError,
    NotFoundError,
    PermissionError,
    RateLimitError,
    RequestTimeoutError,
    ServerError,
    ValidationError,
    WebhookVerificationError,
)
from .identity import external_id_proof
from .webhooks import verify_webhook

__all__ = [
    "MAX_WAIT_SECONDS",
    "APIConnectionError",
    "AuthenticationError",
    "ConflictError",
    "GoneError",
    "Herald",
    "HeraldError",
    "NotFoundError",
    "PermissionError",
    "RateLimitError",
    "RequestTimeoutError",
    "ServerError",
    "ValidationError",
    "WebhookVerificationError",
    "external_id_proof",
    "verify_webhook",
]
