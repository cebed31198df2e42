"""Identity verification, on your server: the proof that makes a browser subscriber's externalId
verified (an approver device, the only kind that receives questions)."""

from __future__ import annotations

import hashlib
import hmac


def external_id_proof(secret: str, external_id: str) -> str:
    """HMAC-SHA256 of ``external_id`` (UTF-8) keyed with the whole identity-verification secret, as
    lowercase hex. Compute it where the user is signed in, with the secret from
    ``Herald.get_identity_secret()`` (never sent to a browser), and hand it to the browser SDK:
    ``herald.setExternalId(id, { proof })``."""
    return hmac.new(secret.encode("utf-8"), external_id.encode("utf-8"), hashlib.sha256).hexdigest()
