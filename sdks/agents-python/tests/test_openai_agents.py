"""The OpenAI Agents SDK adapter in the SDK's real Runner loop, driven by the SDK's own
ScriptedModel (no model provider), against the running system."""

from __future__ import annotations

import asyncio
import json
import queue
import unittest
import uuid
from typing import Any, Callable

from agents import Agent, FunctionTool, RunResult, Runner, RunState, ToolCallOutputItem, function_tool, set_tracing_disabled
from agents.exceptions import UserError
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_support import APPROVED_DEPLOY, DEPLOY_ARGUMENTS, POLICY, Ledger, broken_herald, expire, herald
from herald_agents.gate import Gate
from herald_agents.openai_agents import decide_approvals, gated, herald_tools
from herald_sdk import Herald, ServerError
from herald_sdk.types import Decision
from support import answer_page, person_answers


def setUpModule() -> None:
    # Traces would be exported to a model provider.
    set_tracing_disabled(True)
    herald().put_policy(POLICY)


def own_tools(ledger: Ledger) -> list[FunctionTool]:
    """The agent's own tools; each records that it ran."""

    @function_tool
    def deploy(service: str, replicas: int, regions: list[str]) -> str:
        """Deploy a service."""
        return ledger.record("deploy", {"service": service, "replicas": replicas, "regions": regions})

    @function_tool
    def read_status(service: str) -> str:
        """Read a service's status."""
        return ledger.record("read_status", {"service": service})

    @function_tool
    def delete_service(service: str) -> str:
        """Delete a service."""
        return ledger.record("delete_service", {"service": service})

    return [deploy, read_status, delete_service]


def deployer(gate: Gate, ledger: Ledger, model: ScriptedModel) -> Agent[Any]:
    return Agent(name="Deployer", model=model, tools=[*herald_tools(gate.herald, agent_name="Deployer", ask_timeout=20), *(gated(tool, gate) for tool in own_tools(ledger))])


def calls(name: str, arguments: dict[str, Any]) -> ScriptedModel:
    """A model that calls the tool once, then says it is done."""
    return ScriptedModel([[function_call(name, arguments, call_id=f"call_{uuid.uuid4().hex}")], [assistant_message("Finished.")]])


def outputs(result: RunResult) -> list[Any]:
    return [item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)]


class AgentTestCase(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        # The test loop runs in debug mode, which logs every step over 0.1 s; the SDK's first steps take longer.
        asyncio.get_running_loop().slow_callback_duration = 5


class GateTest(AgentTestCase):
    def setUp(self) -> None:
        self.herald = herald()
        self.gate = Gate(self.herald, agent_name="Deployer")
        self.ledger = Ledger()

    async def test_allow_runs_the_tool_at_once(self) -> None:
        result = await Runner.run(deployer(self.gate, self.ledger, calls("read_status", {"service": "api"})), "Status?")
        self.assertEqual((self.ledger.calls, outputs(result), result.interruptions, result.final_output), ([("read_status", {"service": "api"})], ["read_status done"], [], "Finished."))
        self.assertEqual(self.herald.decisions, [])

    async def test_deny_refuses_with_the_policy_reason(self) -> None:
        result = await Runner.run(deployer(self.gate, self.ledger, calls("delete_service", {"service": "api"})), "Delete it")
        self.assertEqual((self.ledger.calls, outputs(result), result.interruptions), ([], ["Refused by policy: forbidden by policy nothing-is-deleted."], []))
        self.assertEqual(self.herald.decisions, [])

    async def test_requires_human_stops_the_run_and_a_yes_runs_the_call_after_the_state_is_restored(self) -> None:
        result = await Runner.run(deployer(self.gate, self.ledger, calls("deploy", DEPLOY_ARGUMENTS)), "Deploy the api")
        [item] = result.interruptions
        [decision] = self.herald.decisions
        self.assertEqual((item.tool_name, json.loads(item.arguments or ""), self.ledger.calls), ("deploy", DEPLOY_ARGUMENTS, []))
        self.assertEqual(
            (decision["status"], decision["toolName"], decision["parameters"], decision["agentName"]),
            ("pending", "deploy", {"service": "api", "replicas": 3, "regions": '["eu","us"]'}, "Deployer"),
        )
        saved = result.to_state().to_string()
        answer_page(decision["decisionPageUrl"], "yes")

        # Another process, in effect: new client, gate (configured alike), tools and agent; the run comes from the saved state.
        client = herald()
        gate = Gate(client, agent_name="Deployer")
        agent = deployer(gate, self.ledger, ScriptedModel([[assistant_message("Deployed.")]]))
        state = await decide_approvals(gate, await RunState.from_string(agent, saved), total_timeout=10)
        resumed = await Runner.run(agent, state)
        self.assertEqual((self.ledger.calls, outputs(resumed), resumed.final_output), ([("deploy", DEPLOY_ARGUMENTS)], [APPROVED_DEPLOY], "Deployed."))
        # Deciding and running found the same decision again rather than opening another.
        self.assertEqual({(d["decisionId"], d["duplicate"]) for d in client.decisions}, {(decision["decisionId"], True)})

    async def refused_after(self, act: Callable[[Decision], object], total_timeout: float = 10) -> Any:
        agent = deployer(self.gate, self.ledger, calls("deploy", DEPLOY_ARGUMENTS))
        result = await Runner.run(agent, "Deploy the api")
        self.assertEqual(len(result.interruptions), 1)
        await asyncio.to_thread(act, self.herald.decisions[-1])
        agent.model = ScriptedModel([[assistant_message("Not deployed.")]])
        resumed = await Runner.run(agent, await decide_approvals(self.gate, result.to_state(), total_timeout=total_timeout))
        self.assertEqual((self.ledger.calls, resumed.final_output), ([], "Not deployed."))
        [output] = outputs(resumed)
        return output

    async def test_no_cancel_expiry_and_silence_refuse(self) -> None:
        self.assertEqual(await self.refused_after(lambda decision: answer_page(decision["decisionPageUrl"], "no")), "Refused: the holder of the answer link answered 'no'.")
        self.assertEqual(await self.refused_after(lambda decision: self.herald.cancel_decision(decision["decisionId"])), "Refused: the approval request was cancelled.")
        self.assertEqual(await self.refused_after(lambda decision: expire(decision["decisionId"])), "Refused: nobody answered before the approval request expired.")
        self.assertEqual(await self.refused_after(lambda decision: None, total_timeout=1.5), "Refused: nobody approved the call in time (no answer is never approval).")

    async def test_approving_the_interruption_by_hand_cannot_run_the_call(self) -> None:
        agent = deployer(self.gate, self.ledger, calls("deploy", DEPLOY_ARGUMENTS))
        result = await Runner.run(agent, "Deploy the api")
        state = result.to_state()
        [item] = state.get_interruptions()
        state.approve(item)
        agent.model = ScriptedModel([[assistant_message("Not deployed.")]])
        resumed = await Runner.run(agent, state)
        self.assertEqual((self.ledger.calls, outputs(resumed)), ([], ["Refused: nobody approved the call in time (no answer is never approval)."]))

    async def test_an_error_is_the_sdks_typed_error_and_the_tool_does_not_run(self) -> None:
        # The SDK reports a tool's failure as its UserError, caused by Herald's typed error.
        with self.assertRaises(UserError) as raised:
            await Runner.run(deployer(Gate(broken_herald()), self.ledger, calls("deploy", DEPLOY_ARGUMENTS)), "Deploy the api")
        cause = raised.exception.__cause__
        assert isinstance(cause, ServerError)
        self.assertEqual((cause.status, cause.code), (503, "unavailable"))
        self.assertEqual(self.ledger.calls, [])


class HeraldToolsTest(AgentTestCase):
    def agent(self, client: Herald, name: str, arguments: dict[str, Any]) -> Agent[Any]:
        return deployer(Gate(client), Ledger(), calls(name, arguments))

    async def test_send_notification(self) -> None:
        client = herald()
        result = await Runner.run(self.agent(client, "send_notification", {"title": "Deploy finished", "body": "api is live", "context": "3 replicas"}), "Tell them")
        [output] = outputs(result)
        body = json.loads(output)
        self.assertEqual((body["success"], body["status"], body["sent"], body["duplicate"]), (True, "queued", 1, False))
        notification = client.get_notification(body["campaignId"])
        self.assertEqual((notification["title"], notification["body"]), ("Deploy finished", "api is live\n\n3 replicas"))

    async def test_ask_user_waits_for_the_answer(self) -> None:
        client = herald()
        running = asyncio.ensure_future(Runner.run(self.agent(client, "ask_user", {"question": "Roll out to us too?"}), "Ask them"))
        try:
            asked = await asyncio.to_thread(client.asked.get, timeout=20)
        except queue.Empty:
            await running  # the run's own error, if it ended without asking
            raise
        await asyncio.to_thread(person_answers, asked, "yes")
        [output] = outputs(await running)
        record = json.loads(output)
        self.assertEqual((record["correlationId"], record["status"], record["answered"], record["value"]), (asked["correlationId"], "answered", True, "yes"))
        # The tool hands the agent who answered: here the holder of the question's link.
        self.assertEqual({**record["answeredBy"], "at": ""}, {"kind": "link", "id": "", "displayName": "the holder of the answer link", "channel": "answer_page", "at": ""})

    async def test_invalid_arguments_are_answered_to_the_model(self) -> None:
        client = herald()
        result = await Runner.run(self.agent(client, "send_notification", {"title": "", "body": "x"}), "Tell them")
        [output] = outputs(result)
        self.assertTrue(output.startswith("Invalid arguments for send_notification: 1 validation error for SendNotificationArguments\ntitle\n"), output)


if __name__ == "__main__":
    unittest.main()
