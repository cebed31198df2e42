"""ask_and_wait, decide_and_wait and authorize_then_decide against the running system."""

from __future__ import annotations

import time
import unittest
import uuid

from herald_sdk.types import DecisionRequest
from support import POLICY, client, env, in_background, person_answers


class AskAndWaitTest(unittest.TestCase):
    def test_waits_across_several_windows_until_a_person_answers(self) -> None:
        herald = client("HERALD_ASK_KEY")
        asked = herald.ask({"question": "Ship it?", "wait": False})
        started = time.monotonic()
        waiting = in_background(lambda: herald.wait_for_ask(asked, total_timeout=30, window_seconds=1))
        # Past at least two one-second windows before the person answers.
        time.sleep(2.5)
        person_answers(asked, "yes")
        record = waiting()
        self.assertEqual((record["correlationId"], record["status"], record["answered"], record.get("value")), (asked["correlationId"], "answered", True, "yes"))
        self.assertGreaterEqual(time.monotonic() - started, 2.5)

    def test_stops_when_the_question_expires_unanswered_or_the_budget_ends(self) -> None:
        herald = client("HERALD_ASK_KEY")
        lifetime = int(env("HERALD_ASK_LIFETIME_SECONDS"))
        started = time.monotonic()
        expired = herald.ask_and_wait({"question": "Anyone there?"}, total_timeout=60, window_seconds=3)
        elapsed = time.monotonic() - started
        self.assertEqual((expired["status"], expired["answered"], expired["expiresInSeconds"]), ("timeout", False, 0))
        self.assertIn("treat it as not approved", expired.get("hint", ""))
        self.assertTrue(lifetime - 1 <= elapsed < lifetime + 5, elapsed)

        started = time.monotonic()
        still_open = herald.ask_and_wait({"question": "Still there?"}, total_timeout=2.5, window_seconds=1)
        self.assertEqual(still_open["answered"], False)
        self.assertGreater(still_open["expiresInSeconds"], 0)
        self.assertLess(time.monotonic() - started, 4.5)


class DecideAndWaitTest(unittest.TestCase):
    def test_returns_the_answer_or_the_pending_decision_when_the_budget_ends(self) -> None:
        herald = client("HERALD_ASK_KEY")
        opened = herald.create_decision({"question": "Rotate the password?"})
        waiting = in_background(lambda: herald.wait_for_decision(opened, total_timeout=30))
        time.sleep(0.5)
        herald.answer_decision(opened["decisionId"], "yes")
        decided = waiting()
        self.assertEqual((decided["decisionId"], decided["status"], decided["approved"]), (opened["decisionId"], "answered", True))

        started = time.monotonic()
        still_open = herald.decide_and_wait({"question": "Nobody will answer this"}, total_timeout=2)
        self.assertEqual((still_open["status"], still_open["approved"]), ("pending", False))
        self.assertLess(time.monotonic() - started, 4)


class AuthorizeThenDecideTest(unittest.TestCase):
    def test_allow_deny_and_requires_human(self) -> None:
        herald = client()
        herald.put_policy(POLICY)
        question: DecisionRequest = {"question": "Deploy to production?"}

        allowed = herald.authorize_then_decide({"toolName": "read_file", "toolTarget": "a.txt"}, question, total_timeout=5)
        self.assertEqual((allowed["approved"], allowed["authorization"]["verdict"], allowed["decision"]), (True, "allow", None))
        denied = herald.authorize_then_decide({"toolName": "rm_rf"}, question, total_timeout=5)
        self.assertEqual((denied["approved"], denied["authorization"]["verdict"], denied["decision"]), (False, "deny", None))

        for answer, approved in (("yes", True), ("no", False)):
            key = f"py-deploy-{uuid.uuid4()}"
            reviewing = in_background(
                lambda: herald.authorize_then_decide({"toolName": "deploy", "toolTarget": "api"}, question, total_timeout=30, idempotency_key=key)
            )
            # The same request under the same key is the helper's decision (whichever of the two came first).
            same = herald.create_decision({**question, "toolName": "deploy", "toolTarget": "api"}, idempotency_key=key)
            herald.answer_decision(same["decisionId"], answer)
            result = reviewing()
            decision = result["decision"]
            assert decision is not None
            self.assertEqual(
                (result["approved"], result["authorization"]["verdict"], decision["decisionId"], decision["status"], decision["answer"], decision["toolName"], decision["audience"]),
                (approved, "requires_human", same["decisionId"], "answered", answer, "deploy", "owner"),
            )

        silent = herald.authorize_then_decide({"toolName": "deploy"}, question, total_timeout=1.5)
        self.assertEqual((silent["approved"], silent["decision"] and silent["decision"]["status"]), (False, "pending"))


if __name__ == "__main__":
    unittest.main()
