"""The tools' arguments are bounded as the API bounds them (herald_agents/_generated.py, generated
from the OpenAPI document), against the running system: the longest the API takes goes through;
what the API refuses, the tool refuses before any request."""

from __future__ import annotations

import json
import unittest
from typing import Any

import herald_sdk
import pydantic
from herald_agents.tools import herald_tool_definitions
from herald_sdk import Herald
from herald_sdk.types import AskRecord, AskRequest, SendRequest, SendResult
from agents_support import herald, link_answer_status, reviewer
from support import env, in_background


class CountingHerald(Herald):
    """The real client, counting the sends and questions the tools make."""

    def __init__(self) -> None:
        super().__init__(env("HERALD_API_KEY"), env("HERALD_URL"))
        self.requests = 0

    def send(self, notification: SendRequest, *, idempotency_key: str | None = None, timeout: float | None = None) -> SendResult:
        self.requests += 1
        return super().send(notification, idempotency_key=idempotency_key, timeout=timeout)

    def ask(self, question: AskRequest, *, timeout: float | None = None) -> AskRecord:
        self.requests += 1
        return super().ask(question, timeout=timeout)


class BoundsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = CountingHerald()
        [self.send, self.ask] = herald_tool_definitions(self.client, agent_name=None, ask_timeout=1)

    def refused(self, run: Any, arguments: dict[str, Any]) -> list[tuple[str | int, ...]]:
        """Where the tool's validation found the arguments wrong."""
        with self.assertRaises(pydantic.ValidationError) as raised:
            run(arguments)
        return [tuple(error["loc"]) for error in raised.exception.errors()]

    def test_send_notification_takes_a_256_character_title_and_refuses_what_the_api_refuses(self) -> None:
        title = "t" * 256
        result = json.loads(self.send.run({"title": title, "body": "b", "url": "https://example.com/deploys/42"}))
        notification = self.client.get_notification(result["campaignId"])
        self.assertEqual((result["status"], notification["title"], notification["url"]), ("queued", title, "https://example.com/deploys/42"))
        cases: list[tuple[SendRequest, str]] = [
            ({"title": "t" * 257, "body": "b"}, "title"),
            ({"title": "t", "body": "b" * 2_049}, "body"),
            ({"title": "t", "body": "b", "url": "https://example.com/a b"}, "url"),
            ({"title": "t", "body": "b", "url": "ftp://example.com/a"}, "url"),
        ]
        for request, field in cases:
            self.assertEqual(self.refused(self.send.run, dict(request)), [(field,)], request)
            # The API refuses the same body, naming the same field.
            with self.assertRaises(herald_sdk.ValidationError) as raised:
                Herald(env("HERALD_API_KEY"), env("HERALD_URL")).send(request)
            self.assertEqual([problem["field"] for problem in raised.exception.fields], [field])
        self.assertEqual(self.client.requests, 1)

    def test_ask_user_refuses_what_the_api_refuses_before_any_request(self) -> None:
        cases: list[tuple[dict[str, Any], tuple[str | int, ...]]] = [
            ({"question": "q" * 501}, ("question",)),
            ({"question": "Which?", "type": "select", "options": ["eu", "eu"]}, ("options",)),
            ({"question": "Which?", "type": "select", "options": [str(index) for index in range(21)]}, ("options",)),
            ({"question": "Which?", "type": "select", "options": ["eu", "o" * 201]}, ("options", 1)),
            ({"question": "Which?", "type": "choose"}, ("type",)),
            ({"question": "Why?", "type": "input", "placeholder": "p" * 201}, ("placeholder",)),
            ({"question": "Go?", "context": "c" * 2_001}, ("context",)),
            ({"question": "Go?", "approvers": [{"kind": "email", "id": f"ops{index}@example.com"} for index in range(21)]}, ("approvers",)),
            ({"question": "Go?", "approvers": [{"kind": "fax", "id": "555"}]}, ("approvers", 0, "kind")),
            ({"question": "Go?", "approvers": [{"kind": "email", "id": ""}]}, ("approvers", 0, "id")),
            ({"question": "Go?", "escalation": [{"afterSeconds": 0}]}, ("escalation", 0, "afterSeconds")),
            ({"question": "Go?", "escalation": [{"afterSeconds": 60, "channels": ["email", "email"]}]}, ("escalation", 0, "channels")),
            ({"question": "Go?", "escalation": [{"afterSeconds": 60, "approvers": [{"kind": "pager", "id": "ops"}]}]}, ("escalation", 0, "approvers", 0, "kind")),
        ]
        for arguments, where in cases:
            self.assertEqual(self.refused(self.ask.run, arguments), [where], arguments)
            # The API refuses the same question, naming the same field.
            with self.assertRaises(herald_sdk.ValidationError) as raised:
                Herald(env("HERALD_API_KEY"), env("HERALD_URL")).ask({**arguments, "wait": False})  # type: ignore[typeddict-item]
            self.assertEqual([problem["field"] for problem in raised.exception.fields], [".".join(map(str, where))], arguments)
        self.assertEqual(self.client.requests, 0)

    def test_ask_user_with_approvers_refuses_the_link_and_its_result_names_the_approver_who_answered(self) -> None:
        key_id, reviewing = reviewer()
        client = herald()
        [_, ask] = herald_tool_definitions(client, agent_name=None, ask_timeout=30)
        asking = in_background(lambda: json.loads(ask.run({"question": "Rotate the signing key?", "approvers": [{"kind": "key", "id": key_id}]})))
        asked = client.asked.get(timeout=10)
        self.assertEqual((asked["question"], asked["approvers"]), ("Rotate the signing key?", [{"kind": "key", "id": key_id}]))
        self.assertEqual(link_answer_status(asked["liveUrl"], "yes"), 403)
        reviewing.answer_ask(asked["correlationId"], "yes")
        record = asking()
        self.assertEqual((record["status"], record["value"]), ("answered", "yes"))
        self.assertEqual({**record["answeredBy"], "at": ""}, {"kind": "key", "id": key_id, "displayName": key_id, "channel": "api", "at": ""})


if __name__ == "__main__":
    unittest.main()
