"""The LangGraph adapter in a real LangGraph agent loop (a scripted chat model emits the calls)
against the running system."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import uuid
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agents_support import APPROVED_DEPLOY, DEPLOY_ARGUMENTS, POLICY, Ledger, broken_herald, expire, herald, next_question
from herald_agents.gate import Gate
from herald_agents.langgraph import APPROVAL_INTERRUPT, herald_tools, wait_for_decisions
from herald_sdk import ServerError
from langgraph_agent import agent, gated_agent, scripted, tool_call
from support import answer_page, in_background, person_answers

HERE = os.path.dirname(os.path.abspath(__file__))


def setUpModule() -> None:
    herald().put_policy(POLICY)


def config() -> Any:
    return {"configurable": {"thread_id": f"thread-{uuid.uuid4()}"}}


def tool_messages(result: dict[str, Any]) -> list[ToolMessage]:
    return [message for message in result["messages"] if isinstance(message, ToolMessage)]


class GateTest(unittest.TestCase):
    def setUp(self) -> None:
        self.herald = herald()
        self.gate = Gate(self.herald, agent_name="Deploy bot")
        self.ledger = Ledger()

    def start(self, name: str, arguments: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
        graph = gated_agent(self.gate, scripted(tool_call(name, arguments), AIMessage(content="Finished.")), self.ledger, InMemorySaver())
        run = config()
        return graph, run, graph.invoke({"messages": [HumanMessage(content="Go")]}, run)

    def test_allow_runs_the_tool_at_once(self) -> None:
        _, _, result = self.start("read_status", {"service": "api"})
        self.assertEqual(self.ledger.calls, [("read_status", {"service": "api"})])
        [message] = tool_messages(result)
        self.assertEqual((message.content, message.status, message.tool_call_id), ("read_status done", "success", "call_1"))
        self.assertEqual(result["messages"][-1].content, "Finished.")
        self.assertEqual(self.herald.decisions, [])

    def test_deny_refuses_with_the_policy_reason(self) -> None:
        _, _, result = self.start("delete_service", {"service": "api"})
        self.assertEqual(self.ledger.calls, [])
        [message] = tool_messages(result)
        self.assertEqual((message.content, message.status), ("Refused by policy: forbidden by policy nothing-is-deleted.", "error"))
        self.assertEqual(self.herald.decisions, [])

    def test_requires_human_pauses_the_graph_with_a_decision_bound_to_the_exact_arguments(self) -> None:
        graph, run, result = self.start("deploy", DEPLOY_ARGUMENTS)
        [paused] = result["__interrupt__"]
        [decision] = self.herald.decisions
        self.assertEqual(
            paused.value,
            {
                "type": APPROVAL_INTERRUPT,
                "decisionId": decision["decisionId"],
                "decisionPageUrl": decision["decisionPageUrl"],
                "question": "Allow the agent to call deploy?",
                "toolName": "deploy",
                "arguments": DEPLOY_ARGUMENTS,
            },
        )
        self.assertEqual(
            (decision["status"], decision["toolName"], decision["parameters"], decision["agentName"], decision["context"]),
            ("pending", "deploy", {"service": "api", "replicas": 3, "regions": '["eu","us"]'}, "Deploy bot", 'deploy({"regions": ["eu", "us"], "replicas": 3, "service": "api"})'),
        )
        self.assertEqual(self.ledger.calls, [])
        # Resuming before anyone answered: one more read, still open, so refused.
        result = graph.invoke(Command(resume={paused.id: "go on"}), run)
        self.assertEqual(tool_messages(result)[-1].content, "Refused: nobody approved the call in time (no answer is never approval).")
        self.assertEqual(self.ledger.calls, [])
        # The evaluation on resume found the same decision rather than opening another.
        self.assertEqual([(d["decisionId"], d["duplicate"]) for d in self.herald.decisions], [(decision["decisionId"], False), (decision["decisionId"], True)])

    def refused_after(self, act: Any, total_timeout: float = 30) -> str:
        graph, run, result = self.start("deploy", DEPLOY_ARGUMENTS)
        [paused] = result["__interrupt__"]
        act(paused.value)
        result = graph.invoke(wait_for_decisions(self.gate, result["__interrupt__"], total_timeout=total_timeout), run)
        self.assertEqual(self.ledger.calls, [])
        message = tool_messages(result)[-1]
        self.assertEqual(message.status, "error")
        return str(message.content)

    def test_no_cancel_expiry_and_silence_refuse(self) -> None:
        self.assertEqual(self.refused_after(lambda value: answer_page(value["decisionPageUrl"], "no")), "Refused: the holder of the answer link answered 'no'.")
        self.assertEqual(self.refused_after(lambda value: self.herald.cancel_decision(value["decisionId"])), "Refused: the approval request was cancelled.")
        self.assertEqual(self.refused_after(lambda value: expire(value["decisionId"])), "Refused: nobody answered before the approval request expired.")
        started = time.monotonic()
        self.assertEqual(self.refused_after(lambda value: None, total_timeout=1.5), "Refused: nobody approved the call in time (no answer is never approval).")
        self.assertLess(time.monotonic() - started, 5)

    def test_an_error_is_the_sdks_typed_error_and_the_tool_does_not_run(self) -> None:
        graph = gated_agent(Gate(broken_herald()), scripted(tool_call("deploy", DEPLOY_ARGUMENTS)), self.ledger, InMemorySaver())
        with self.assertRaises(ServerError) as raised:
            graph.invoke({"messages": [HumanMessage(content="Go")]}, config())
        self.assertEqual((raised.exception.status, raised.exception.code), (503, "unavailable"))
        self.assertEqual(self.ledger.calls, [])


class AsyncGraphTest(unittest.IsolatedAsyncioTestCase):
    async def test_an_async_graph_pauses_and_a_yes_runs_the_call(self) -> None:
        client = herald()
        gate = Gate(client)
        ledger = Ledger()
        graph = gated_agent(gate, scripted(tool_call("deploy", DEPLOY_ARGUMENTS), AIMessage(content="Deployed.")), ledger, InMemorySaver())
        run = config()
        result = await graph.ainvoke({"messages": [HumanMessage(content="Go")]}, run)
        [paused] = result["__interrupt__"]
        self.assertEqual(ledger.calls, [])
        await asyncio.to_thread(answer_page, paused.value["decisionPageUrl"], "yes")
        result = await graph.ainvoke(await asyncio.to_thread(wait_for_decisions, gate, result["__interrupt__"], total_timeout=10), run)
        self.assertEqual((ledger.calls, tool_messages(result)[-1].content, result["messages"][-1].content), ([("deploy", DEPLOY_ARGUMENTS)], APPROVED_DEPLOY, "Deployed."))


class RestartTest(unittest.TestCase):
    def test_the_run_resumes_in_a_new_process_and_runs_the_approved_call_once(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            checkpoints = os.path.join(folder, "checkpoints.sqlite")
            thread = f"thread-{uuid.uuid4()}"

            def life(step: str) -> dict[str, Any]:
                done = subprocess.run([sys.executable, os.path.join(HERE, "langgraph_agent.py"), step, checkpoints, thread], capture_output=True, text=True, timeout=60)
                self.assertEqual(done.returncode, 0, done.stderr)
                return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

            first = life("start")
            [paused] = first["interrupts"]
            self.assertEqual((paused["toolName"], paused["arguments"], first["ran"]), ("deploy", DEPLOY_ARGUMENTS, []))
            answer_page(paused["decisionPageUrl"], "yes")
            second = life("resume")
            self.assertEqual(second["ran"], [["deploy", DEPLOY_ARGUMENTS]])
            self.assertEqual(second["interrupts"], [])
            self.assertEqual(second["messages"][-2:], [["tool", APPROVED_DEPLOY], ["ai", "Deployed."]])


class HeraldToolsTest(unittest.TestCase):
    def run_agent(self, client: Any, *calls: AIMessage) -> Any:
        graph = agent(scripted(*calls, AIMessage(content="Finished.")), herald_tools(client, agent_name="Deploy bot", ask_timeout=20), InMemorySaver())
        return in_background(lambda: graph.invoke({"messages": [HumanMessage(content="Go")]}, config()))

    def test_send_notification(self) -> None:
        client = herald()
        running = self.run_agent(client, tool_call("send_notification", {"title": "Deploy finished", "body": "api is live", "context": "3 replicas"}))
        [sent] = tool_messages(running())
        body = json.loads(str(sent.content))
        self.assertEqual((sent.name, sent.status, body["success"], body["status"], body["sent"], body["duplicate"]), ("send_notification", "success", True, "queued", 1, False))
        notification = client.get_notification(body["campaignId"])
        self.assertEqual((notification["title"], notification["body"]), ("Deploy finished", "api is live\n\n3 replicas"))

    def test_ask_user_waits_for_the_answer(self) -> None:
        client = herald()
        running = self.run_agent(client, tool_call("ask_user", {"question": "Roll out to us too?", "context": "eu is done"}))
        asked = next_question(client, running)
        person_answers(asked, "yes")
        [answered] = tool_messages(running())
        record = json.loads(str(answered.content))
        self.assertEqual((answered.name, record["correlationId"], record["status"], record["answered"], record["value"]), ("ask_user", asked["correlationId"], "answered", True, "yes"))
        # The tool hands the agent who answered: here the holder of the question's link.
        self.assertEqual({**record["answeredBy"], "at": ""}, {"kind": "link", "id": "", "displayName": "the holder of the answer link", "channel": "answer_page", "at": ""})
        self.assertEqual((asked["question"], asked["type"], asked["status"]), ("Roll out to us too?", "confirm", "pending"))

    def test_invalid_arguments_are_the_frameworks_validation_error(self) -> None:
        [send, _] = herald_tools(herald())
        self.assertEqual(
            set(send.args),
            {"title", "body", "url", "context"},
        )
        with self.assertRaises(Exception) as raised:
            send.invoke({"title": "", "body": "x"})
        self.assertIn("title", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
