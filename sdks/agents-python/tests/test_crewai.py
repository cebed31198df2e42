"""The CrewAI adapter in CrewAI's real agent loop (a Crew's kickoff; a scripted LLM writes the
ReAct steps that call the tools) against the running system. The driver sets CrewAI's storage
to a temporary folder and turns its telemetry and tracing off."""

from __future__ import annotations

import json
import time
import unittest
from typing import Any, Callable, Sequence

from crewai import Agent, Crew, CrewOutput, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import BaseTool, tool

from agents_support import APPROVED_DEPLOY, DEPLOY_ARGUMENTS, POLICY, Ledger, expire, herald, next_question
from herald_agents.crewai import HeraldCrewTool, HeraldGatedTool, gated, herald_tools
from herald_agents.gate import Gate
from herald_sdk import AuthenticationError, Herald, ServerError
from herald_sdk.types import Decision
from support import CountingProxy, answer_page, env, in_background, person_answers


def setUpModule() -> None:
    herald().put_policy(POLICY)


class ScriptedLLM(BaseLLM):
    """Answers each call with the next scripted step, in CrewAI's ReAct text format, and keeps
    what it was sent (the tools' results reach the model as observations in those messages)."""

    steps: list[str]
    received: list[str] = []

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None, from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> str:
        self.received.append(json.dumps(messages))
        return self.steps.pop(0)

    def supports_function_calling(self) -> bool:
        return False


def action(tool_name: str, arguments: dict[str, Any]) -> str:
    return f"Thought: I use {tool_name}.\nAction: {tool_name}\nAction Input: {json.dumps(arguments)}"


FINAL = "Thought: I now know the final answer\nFinal Answer: Finished."


def own_tools(ledger: Ledger) -> list[BaseTool]:
    """The agent's own tools; each records that it ran."""

    @tool("deploy")
    def deploy(service: str, replicas: int, regions: list[str]) -> str:
        """Deploy a service."""
        return ledger.record("deploy", {"service": service, "replicas": replicas, "regions": regions})

    @tool("read_status")
    def read_status(service: str) -> str:
        """Read a service's status."""
        return ledger.record("read_status", {"service": service})

    @tool("delete_service")
    def delete_service(service: str) -> str:
        """Delete a service."""
        return ledger.record("delete_service", {"service": service})

    return [deploy, read_status, delete_service]


def kickoff(tools: Sequence[BaseTool], llm: ScriptedLLM) -> str:
    agent = Agent(role="Deployer", goal="Run the services", backstory="Runs deploys for the team.", llm=llm, tools=list(tools))
    task = Task(description="Do what the operator asked.", expected_output="One sentence.", agent=agent)
    output = Crew(agents=[agent], tasks=[task]).kickoff()
    assert isinstance(output, CrewOutput)
    return output.raw


class CrewTestCase(unittest.TestCase):
    def observed(self, llm: ScriptedLLM, text: str) -> None:
        """The model was shown the tool's result in its next call."""
        self.assertEqual(len(llm.received), 2)
        self.assertIn(json.dumps(text)[1:-1], llm.received[1])


class GateTest(CrewTestCase):
    def setUp(self) -> None:
        self.herald = herald()
        self.ledger = Ledger()

    def run_crew(self, gate: Gate, tool_name: str, arguments: dict[str, Any]) -> tuple[Callable[[], str], ScriptedLLM]:
        llm = ScriptedLLM(model="scripted", steps=[action(tool_name, arguments), FINAL])
        tools = [gated(tool, gate) for tool in own_tools(self.ledger)]
        return in_background(lambda: kickoff(tools, llm)), llm

    def test_allow_runs_the_tool_at_once(self) -> None:
        running, llm = self.run_crew(Gate(self.herald), "read_status", {"service": "api"})
        self.assertEqual(running(), "Finished.")
        self.assertEqual(self.ledger.calls, [("read_status", {"service": "api"})])
        self.observed(llm, "read_status done")
        self.assertEqual(self.herald.decisions, [])

    def test_deny_refuses_with_the_policy_reason(self) -> None:
        running, llm = self.run_crew(Gate(self.herald), "delete_service", {"service": "api"})
        running()
        self.assertEqual(self.ledger.calls, [])
        self.observed(llm, "Refused by policy: forbidden by policy nothing-is-deleted.")

    def decided(self, act: Callable[[Decision], object], total_timeout: float = 30) -> ScriptedLLM:
        running, llm = self.run_crew(Gate(self.herald, agent_name="Deployer", total_timeout=total_timeout), "deploy", DEPLOY_ARGUMENTS)
        opened = self.herald.opened.get(timeout=30)
        self.assertEqual((opened["toolName"], opened["parameters"], opened["agentName"]), ("deploy", {"service": "api", "replicas": 3, "regions": '["eu","us"]'}, "Deployer"))
        # The tool waits for the person: nothing ran yet.
        self.assertEqual(self.ledger.calls, [])
        act(opened)
        self.assertEqual(running(), "Finished.")
        return llm

    def test_a_yes_runs_the_call_with_the_approved_arguments(self) -> None:
        llm = self.decided(lambda decision: answer_page(decision["decisionPageUrl"], "yes"))
        self.assertEqual(self.ledger.calls, [("deploy", DEPLOY_ARGUMENTS)])
        self.observed(llm, APPROVED_DEPLOY)

    def test_no_cancel_expiry_and_silence_refuse(self) -> None:
        cases: list[tuple[Callable[[Decision], object], float, str]] = [
            (lambda decision: answer_page(decision["decisionPageUrl"], "no"), 30, "Refused: the holder of the answer link answered 'no'."),
            (lambda decision: self.herald.cancel_decision(decision["decisionId"]), 30, "Refused: the approval request was cancelled."),
            (lambda decision: expire(decision["decisionId"]), 30, "Refused: nobody answered before the approval request expired."),
            (lambda decision: None, 1.5, "Refused: nobody approved the call in time (no answer is never approval)."),
        ]
        for act, total_timeout, reason in cases:
            started = time.monotonic()
            llm = self.decided(act, total_timeout)
            self.assertEqual(self.ledger.calls, [])
            self.observed(llm, reason)
            self.assertLess(time.monotonic() - started, 15)

    def test_an_error_refuses_once_and_keeps_the_sdks_typed_error(self) -> None:
        # CrewAI calls a tool again when it raises; the gate refuses instead: one request, no retry.
        proxy = CountingProxy(env("HERALD_BROKEN_URL"))
        try:
            gate = Gate(Herald(env("HERALD_API_KEY"), proxy.url))
            tools = [gated(tool, gate) for tool in own_tools(self.ledger)]
            llm = ScriptedLLM(model="scripted", steps=[action("deploy", DEPLOY_ARGUMENTS), FINAL])
            kickoff(tools, llm)
            self.assertEqual(proxy.requests, ["POST /api/v1/server/authorize"])
        finally:
            proxy.close()
        self.assertEqual(self.ledger.calls, [])
        deploy = tools[0]
        assert isinstance(deploy, HeraldGatedTool)
        assert isinstance(deploy.last_error, ServerError)
        self.assertEqual((deploy.last_error.status, deploy.last_error.code), (503, "unavailable"))
        self.observed(llm, "Refused: Herald could not evaluate the call: ServerError (503 unavailable): A backing service is unavailable.")


class HeraldToolsTest(CrewTestCase):
    def test_send_notification(self) -> None:
        client = herald()
        llm = ScriptedLLM(model="scripted", steps=[action("send_notification", {"title": "Deploy finished", "body": "api is live", "context": "3 replicas"}), FINAL])
        kickoff(herald_tools(client), llm)
        self.assertIn('\\"status\\": \\"queued\\", ', llm.received[1])
        campaign = llm.received[1].split('\\"campaignId\\": \\"')[1].split("\\")[0]
        notification = client.get_notification(campaign)
        self.assertEqual((notification["title"], notification["body"]), ("Deploy finished", "api is live\n\n3 replicas"))

    def test_an_error_is_answered_once_and_kept_as_the_sdks_typed_error(self) -> None:
        proxy = CountingProxy(env("HERALD_URL"))
        try:
            [send, _] = herald_tools(Herald("pk_unknown.key", proxy.url))
            llm = ScriptedLLM(model="scripted", steps=[action("send_notification", {"title": "Deploy finished", "body": "api is live"}), FINAL])
            kickoff([send], llm)
            self.assertEqual(proxy.requests, ["POST /api/v1/server/send"])
        finally:
            proxy.close()
        assert isinstance(send, HeraldCrewTool) and isinstance(send.last_error, AuthenticationError)
        self.assertEqual((send.last_error.status, send.last_error.code), (401, "unauthorized"))
        self.observed(llm, f"Failed: Herald answered AuthenticationError (401 unauthorized): {send.last_error.message}")

    def test_ask_user_waits_for_the_answer(self) -> None:
        client = herald()
        llm = ScriptedLLM(model="scripted", steps=[action("ask_user", {"question": "Roll out to us too?"}), FINAL])
        running = in_background(lambda: kickoff(herald_tools(client, agent_name="Deployer", ask_timeout=20), llm))
        asked = next_question(client, running)
        person_answers(asked, "yes")
        running()
        self.assertIn(f'\\"correlationId\\": \\"{asked["correlationId"]}\\"', llm.received[1])
        self.assertIn('\\"status\\": \\"answered\\", \\"answered\\": true', llm.received[1])


if __name__ == "__main__":
    unittest.main()
