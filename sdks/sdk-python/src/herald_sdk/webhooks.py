"""Standard Webhooks verification (https://www.standardwebhooks.com) of what Herald posts."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from typing import Mapping, Sequence, cast

from .errors import WebhookVerificationError
from .types import WebhookEvent


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if value is None:
        value = next((text for key, text in headers.items() if key.lower() == name), None)
    if not value:
        raise WebhookVerificationError(f"Missing {name} header")
    return value


def _key_of(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret (the prefix is optional, as in the reference libraries)."""
    try:
        key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except binascii.Error as err:
        raise WebhookVerificationError("The webhook secret is not base64") from err
    if not key:
        raise WebhookVerificationError("The webhook secret is empty")
    return key


def _signature(part: str) -> bytes | None:
    try:
        return base64.b64decode(part[3:], validate=True)
    except binascii.Error:
        return None


def verify_webhook(
    secrets: str | Sequence[str],
    headers: Mapping[str, str],
    raw_body: str | bytes,
    *,
    tolerance_seconds: int = 300,
    now: float | None = None,
) -> WebhookEvent:
    """Checks a webhook and returns its parsed body.

    Pass the raw body exactly as received (not re-serialised JSON) and every secret that may sign
    (two for 24 h after a rotation). Raises WebhookVerificationError unless one ``v1`` signature
    matches one secret (compared in constant time) and the timestamp is within the tolerance.
    Dedupe on the ``webhook-id`` header yourself.
    """
    message_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if not timestamp.isdigit():
        raise WebhookVerificationError("Invalid webhook-timestamp header")
    if abs((time.time() if now is None else now) - int(timestamp)) > tolerance_seconds:
        raise WebhookVerificationError("The webhook timestamp is outside the tolerance")
    body = raw_body.encode() if isinstance(raw_body, str) else raw_body
    signed = f"{message_id}.{timestamp}.".encode() + body
    given = [signature for part in signatures.split(" ") if part.startswith("v1,") and (signature := _signature(part)) is not None]
    keys = [_key_of(secret) for secret in ([secrets] if isinstance(secrets, str) else secrets)]
    for key in keys:
        expected = hmac.new(key, signed, hashlib.sha256).digest()
        if any(hmac.compare_digest(signature, expected) for signature in given):
            return cast(WebhookEvent, json.loads(body))
    raise WebhookVerificationError("No matching webhook signature")
