"""Typed errors, no retries, and the per-request time-out, against the running system."""

from __future__ import annotations

import unittest

from herald_sdk import (
    AuthenticationError,
    Herald,
    HeraldError,
    NotFoundError,
    PermissionError,
    RateLimitError,
    RequestTimeoutError,
    ServerError,
    ValidationError,
)
from support import CountingProxy, client, env, raised


class TypedErrorTest(unittest.TestCase):
    def test_400_401_403_404(self) -> None:
        herald = client()
        invalid = raised(ValidationError, lambda: herald.send({"title": "", "body": "x"}))
        self.assertEqual(
            (invalid.status, invalid.code, invalid.fields, invalid.retry_after),
            (400, "invalid_request", [{"field": "title", "in": "body", "problem": "must NOT have fewer than 1 characters"}], None),
        )
        none = raised(ValidationError, lambda: herald.send({"title": "Hi", "body": "Nobody", "externalIds": ["nobody"]}))
        self.assertEqual(none.body["error"], "No subscribers found matching criteria")
        unauthorized = raised(AuthenticationError, lambda: Herald("pk_aaaaaaaaaaaaaaaa.bbbb", env("HERALD_URL")).get_identity())
        self.assertEqual((unauthorized.status, unauthorized.code), (401, "unauthorized"))
        forbidden = raised(PermissionError, lambda: client("HERALD_RUNTIME_KEY").list_subscribers())
        self.assertEqual((forbidden.status, forbidden.code, forbidden.message), (403, "forbidden", "This key cannot access this endpoint"))
        upgrade = raised(PermissionError, lambda: client("HERALD_FREE_KEY").send({"title": "a", "body": "b"}))
        self.assertEqual(upgrade.code, "plan_upgrade_required")
        self.assertIsInstance(upgrade.body["upgradeUrl"], str)
        missing = raised(NotFoundError, lambda: herald.get_notification("ntf_unknown"))
        self.assertEqual((missing.status, missing.code), (404, "not_found"))
        self.assertIsInstance(missing, HeraldError)

    def test_pending_ask_limit_is_a_rate_limit_error_without_retry_after(self) -> None:
        herald = client("HERALD_PENDING_KEY")
        for index in range(25):
            herald.ask({"question": f"Question {index}?", "wait": False})
        limited = raised(RateLimitError, lambda: herald.ask({"question": "One too many?", "wait": False}))
        self.assertEqual((limited.status, limited.code, limited.retry_after), (429, None, None))
        self.assertTrue(limited.body["error"].startswith("This workspace already has 25 pending questions"))


class NoRetryTest(unittest.TestCase):
    def test_a_429_is_raised_after_exactly_one_request(self) -> None:
        proxy = CountingProxy(env("HERALD_URL"))
        try:
            herald = Herald(env("HERALD_LIMITED_KEY"), proxy.url)
            for _ in range(100):
                herald.get_identity()
            limited = raised(RateLimitError, lambda: herald.get_identity())
            self.assertEqual(limited.code, "rate_limited")
            self.assertTrue(isinstance(limited.retry_after, int) and 1 <= limited.retry_after <= 60, limited.retry_after)
            self.assertEqual(limited.body["retryAfter"], limited.retry_after)
            self.assertEqual(len(proxy.requests), 101)
        finally:
            proxy.close()

    def test_a_503_is_raised_after_exactly_one_request(self) -> None:
        proxy = CountingProxy(env("HERALD_BROKEN_URL"))
        try:
            unavailable = raised(ServerError, lambda: Herald(env("HERALD_API_KEY"), proxy.url).authorize({"toolName": "deploy"}))
            self.assertEqual((unavailable.status, unavailable.code), (503, "unavailable"))
            self.assertEqual(proxy.requests, ["POST /api/v1/server/authorize"])
        finally:
            proxy.close()


class TimeoutTest(unittest.TestCase):
    def test_a_per_request_time_out_raises_request_timeout_error(self) -> None:
        herald = client("HERALD_ASK_KEY")
        decision = herald.create_decision({"question": "Wait for me?"})
        timed_out = raised(RequestTimeoutError, lambda: herald.get_decision(decision["decisionId"], wait=True, timeout=0.3))
        self.assertEqual((timed_out.status, timed_out.code), (0, "timeout"))


if __name__ == "__main__":
    unittest.main()
