"""verify_webhook against a webhook signed by the reference Standard Webhooks library (the
`standardwebhooks` npm package, in sdks/sdk/test/python.test.ts), with two secrets as during a
rotation."""

from __future__ import annotations

import base64
import json
import os
import time
import unittest
from typing import TypedDict

from herald_sdk import WebhookVerificationError, verify_webhook
from support import env


class Fixture(TypedDict):
    secret: str
    previousSecret: str
    body: str
    headers: dict[str, str]


def fixture() -> Fixture:
    loaded: Fixture = json.loads(env("HERALD_WEBHOOK_FIXTURE"))
    return loaded


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


class VerifyWebhookTest(unittest.TestCase):
    def test_either_secret_of_a_rotation_verifies_and_the_body_is_returned(self) -> None:
        signed = fixture()
        self.assertEqual(len(signed["headers"]["webhook-signature"].split(" ")), 2)
        for held in ([signed["secret"]], [signed["previousSecret"]], [new_secret(), signed["previousSecret"]], signed["secret"]):
            self.assertEqual(verify_webhook(held, signed["headers"], signed["body"]), json.loads(signed["body"]))
        # Bytes bodies, a secret without whsec_, and header names in any case work too.
        upper = {name.upper(): value for name, value in signed["headers"].items()}
        self.assertEqual(verify_webhook(signed["secret"].removeprefix("whsec_"), upper, signed["body"].encode()), json.loads(signed["body"]))

    def test_a_wrong_secret_or_a_changed_message_is_refused(self) -> None:
        signed = fixture()
        headers, body, secret = signed["headers"], signed["body"], signed["secret"]
        cases = [
            ([new_secret(), new_secret()], headers, body),
            (secret, headers, body.replace("yes", "no")),
            (secret, {**headers, "webhook-id": "msg_other"}, body),
            (secret, {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) + 1)}, body),
            (secret, {**headers, "webhook-signature": headers["webhook-signature"].replace("v1,", "v2,")}, body),
            (secret, {**headers, "webhook-signature": "v1,!!!"}, body),
        ]
        for secrets, case_headers, case_body in cases:
            with self.assertRaisesRegex(WebhookVerificationError, "^No matching webhook signature$"):
                verify_webhook(secrets, case_headers, case_body)
        for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
            with self.assertRaisesRegex(WebhookVerificationError, f"^Missing {name} header$"):
                verify_webhook(secret, {key: value for key, value in headers.items() if key != name}, body)

    def test_the_timestamp_must_be_within_the_tolerance_either_way(self) -> None:
        signed = fixture()
        sent = int(signed["headers"]["webhook-timestamp"])
        self.assertLess(abs(time.time() - sent), 300)
        for offset in (-299, 299):
            verify_webhook(signed["secret"], signed["headers"], signed["body"], now=sent + offset)
        for offset in (-301, 301):
            with self.assertRaisesRegex(WebhookVerificationError, "^The webhook timestamp is outside the tolerance$"):
                verify_webhook(signed["secret"], signed["headers"], signed["body"], now=sent + offset)
        verify_webhook(signed["secret"], signed["headers"], signed["body"], now=sent + 3_000, tolerance_seconds=3_600)
        with self.assertRaisesRegex(WebhookVerificationError, "^The webhook timestamp is outside the tolerance$"):
            verify_webhook(signed["secret"], signed["headers"], signed["body"], now=sent + 31, tolerance_seconds=30)


if __name__ == "__main__":
    unittest.main()
