"""The gate every adapter shares, on its own, against the running system: the arguments as
parameters, the blocking wait (what CrewAI uses), and a ruling bound to the exact call."""

from __future__ import annotations

import time
import unittest
from typing import Mapping

from agents_support import DEPLOY_ARGUMENTS, POLICY, herald, link_answer_status, reviewer
from herald_agents import Gate, UnboundArguments, tool_parameters
from support import answer_page, in_background


def setUpModule() -> None:
    herald().put_policy(POLICY)


class ParametersTest(unittest.TestCase):
    def test_scalars_as_they_are_and_nested_values_as_their_json(self) -> None:
        self.assertEqual(
            tool_parameters({"a": "x", "b": 2, "c": 2.5, "d": True, "e": None, "f": {"z": 1, "y": [1, "é"]}}),
            {"a": "x", "b": 2, "c": 2.5, "d": True, "e": None, "f": '{"y":[1,"é"],"z":1}'},
        )

    def test_what_cannot_be_bound_is_refused_before_any_request(self) -> None:
        cases: dict[str, Mapping[str, object]] = {
            "33 arguments; an approval binds at most 32": {f"a{index}": index for index in range(33)},
            "argument 'long' is longer than 1000 characters": {"long": "x" * 1_001},
            "argument 'nested' is longer than 1000 characters": {"nested": ["x" * 999]},
            f"argument name {'n' * 65!r} is not 1-64 characters": {"n" * 65: 1},
            "argument name '' is not 1-64 characters": {"": 1},
        }
        client = herald()
        for message, arguments in cases.items():
            with self.assertRaises(UnboundArguments) as raised:
                tool_parameters(arguments)
            self.assertEqual(str(raised.exception), message)
            result = Gate(client).evaluate("deploy", arguments)
            self.assertEqual((result.status, result.reason, result.authorization, result.decision), ("refused", f"Refused: {message}, so it cannot be authorized.", None, None))
        self.assertEqual(client.decisions, [])


class BlockingTest(unittest.TestCase):
    def test_check_waits_for_the_person_and_approves_only_a_yes(self) -> None:
        client = herald()
        gate = Gate(client, agent_name="Deploy bot", total_timeout=30)
        for answer, status, reason in (("yes", "approved", "Approved by the holder of the answer link."), ("no", "refused", "Refused: the holder of the answer link answered 'no'.")):
            checking = in_background(lambda: gate.check("deploy", DEPLOY_ARGUMENTS))
            opened = client.opened.get(timeout=10)
            answer_page(opened["decisionPageUrl"], answer)
            result = checking()
            assert result.decision is not None and result.authorization is not None
            self.assertEqual((result.status, result.reason, result.authorization["verdict"]), (status, reason, "requires_human"))
            self.assertEqual((result.decision["decisionId"], result.decision["status"], result.decision["answer"]), (opened["decisionId"], "answered", answer))

    def test_a_gate_naming_its_approvers_refuses_the_link_and_names_the_approver_who_said_yes(self) -> None:
        client = herald()
        key_id, reviewing = reviewer()
        gate = Gate(client, approvers=[{"kind": "key", "id": key_id}], total_timeout=30)
        checking = in_background(lambda: gate.check("deploy", DEPLOY_ARGUMENTS))
        opened = client.opened.get(timeout=10)
        self.assertEqual(opened["approvers"], [{"kind": "key", "id": key_id}])
        self.assertEqual(link_answer_status(opened["decisionPageUrl"], "yes"), 403)
        reviewing.answer_decision(opened["decisionId"], "yes")
        result = checking()
        assert result.decision is not None
        self.assertEqual((result.status, result.reason), ("approved", f"Approved by {key_id} (key via api)."))
        answered_by = result.decision["answeredBy"]
        assert answered_by is not None
        self.assertEqual({**answered_by, "at": ""}, {"kind": "key", "id": key_id, "displayName": key_id, "channel": "api", "at": ""})

    def test_check_refuses_when_the_budget_ends_unanswered(self) -> None:
        gate = Gate(herald(), total_timeout=1.5)
        started = time.monotonic()
        result = gate.check("deploy", DEPLOY_ARGUMENTS)
        self.assertEqual((result.status, result.reason), ("refused", "Refused: nobody approved the call in time (no answer is never approval)."))
        assert result.decision is not None
        self.assertEqual(result.decision["status"], "pending")
        self.assertLess(time.monotonic() - started, 4)


class BindingTest(unittest.TestCase):
    def test_a_yes_approves_only_the_call_it_was_given_for(self) -> None:
        client = herald()
        gate = Gate(client)
        pending = gate.evaluate("deploy", DEPLOY_ARGUMENTS, call_id="call-binding")
        assert pending.decision is not None
        self.assertEqual(pending.status, "pending")
        self.assertEqual(gate.evaluate("deploy", DEPLOY_ARGUMENTS, call_id="call-binding").decision, {**pending.decision, "duplicate": True, "expiresInSeconds": client.decisions[-1]["expiresInSeconds"]})
        self.assertNotEqual(gate.evaluate("deploy", DEPLOY_ARGUMENTS, call_id="call-other").decision, pending.decision)
        answer_page(pending.decision["decisionPageUrl"], "yes")
        decided = client.get_decision(pending.decision["decisionId"])
        self.assertEqual(gate.judge("deploy", DEPLOY_ARGUMENTS, decided).status, "approved")
        for tool_name, arguments in (("deploy", {**DEPLOY_ARGUMENTS, "replicas": 30}), ("deploy", {"service": "api"}), ("read_status", DEPLOY_ARGUMENTS)):
            self.assertEqual(gate.judge(tool_name, arguments, decided).reason, "Refused: the approval was given for a different tool call.")
        # Found again after the answer (a resumed run): approved as it stands.
        self.assertEqual(gate.evaluate("deploy", DEPLOY_ARGUMENTS, call_id="call-binding").status, "approved")


if __name__ == "__main__":
    unittest.main()
