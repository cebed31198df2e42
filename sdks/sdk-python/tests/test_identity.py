"""Identity verification and pairing against the running system: a proof computed by
external_id_proof is accepted by the real stack, and the subscriber becomes an approver device."""

from __future__ import annotations

import json
import re
import unittest
import urllib.request

from herald_sdk import external_id_proof
from support import client, env


def subscribe(body: dict[str, object]) -> tuple[int, dict[str, object]]:
    """POST /api/v1/subscribe as the browser SDK sends it (site key, the site's Origin)."""
    subscription = json.loads(env("HERALD_PUSH_SUBSCRIPTION"))
    request = urllib.request.Request(
        f"{env('HERALD_URL')}/api/v1/subscribe",
        data=json.dumps({**subscription, **body}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {env('HERALD_IDENTITY_SITE_KEY')}", "Origin": "https://shop.example.test"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, object] = json.loads(response.read())
        return response.status, answer


class IdentityVerificationTest(unittest.TestCase):
    def test_a_proof_made_by_the_sdk_verifies_the_subscriber(self) -> None:
        herald = client("HERALD_IDENTITY_KEY")
        secret = herald.get_identity_secret()
        self.assertRegex(secret["secret"], r"^idsec_[A-Za-z0-9_-]{43}$")
        self.assertIsNone(secret["previousSecretExpiresAt"])
        self.assertEqual(herald.get_reachability(external_id="py-owner")["browserSubscriptions"], 0)
        status, answer = subscribe({"externalId": "py-owner", "externalIdProof": external_id_proof(secret["secret"], "py-owner")})
        self.assertEqual(status, 201)
        subscriber = herald.get_subscriber(str(answer["subscriberId"]))
        self.assertEqual((subscriber["externalId"], subscriber["externalIdVerified"]), ("py-owner", True))
        self.assertEqual(herald.get_reachability(external_id="py-owner")["browserSubscriptions"], 1)

    def test_pair_makes_a_single_use_link(self) -> None:
        link = client("HERALD_IDENTITY_KEY").pair(external_id="py-phone")
        self.assertEqual(link["externalId"], "py-phone")
        self.assertRegex(link["enrollmentUrl"], re.compile(r"/enroll/[A-Za-z0-9_-]{43}$"))


if __name__ == "__main__":
    unittest.main()
