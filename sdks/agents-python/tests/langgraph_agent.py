"""A LangGraph agent for the tests: the usual model-then-tools loop (StateGraph, ToolNode,
tools_condition), a scripted chat model that emits the tool calls, and Herald's tools and gate.

Run as a program it is one process of an agent that is stopped and started again:
``python langgraph_agent.py start|resume <checkpoint file> <thread>`` prints one JSON line with
the interrupts, the tool calls that ran and the last message."""

from __future__ import annotations

import json
import sqlite3
import sys
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from agents_support import DEPLOY_ARGUMENTS, Ledger, herald
from herald_agents.gate import Gate
from herald_agents.langgraph import approval_requests, gated, herald_tools, wait_for_decisions

Graph = CompiledStateGraph[MessagesState, None, MessagesState, MessagesState]


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": arguments, "id": call_id, "type": "tool_call"}])


def scripted(*responses: BaseMessage) -> FakeMessagesListChatModel:
    return FakeMessagesListChatModel(responses=list(responses))


def own_tools(ledger: Ledger) -> list[BaseTool]:
    """The agent's own tools; each records that it ran."""

    def deploy(service: str, replicas: int, regions: list[str]) -> str:
        return ledger.record("deploy", {"service": service, "replicas": replicas, "regions": regions})

    def read_status(service: str) -> str:
        return ledger.record("read_status", {"service": service})

    def delete_service(service: str) -> str:
        return ledger.record("delete_service", {"service": service})

    return [StructuredTool.from_function(function, description=f"{function.__name__} a service") for function in (deploy, read_status, delete_service)]


def agent(model: FakeMessagesListChatModel, tools: list[BaseTool], checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    def think(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", think)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def gated_agent(gate: Gate, model: FakeMessagesListChatModel, ledger: Ledger, checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    return agent(model, [*herald_tools(gate.herald), *(gated(tool, gate) for tool in own_tools(ledger))], checkpointer)


def main(step: str, checkpoint_file: str, thread: str) -> None:
    """One life of the process: start the run until it pauses, or resume it after the person decided."""
    ledger = Ledger()
    gate = Gate(herald(), agent_name="Deploy bot")
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    request: MessagesState = {"messages": [HumanMessage(content="Deploy the api")]}
    with sqlite3.connect(checkpoint_file, check_same_thread=False) as connection:
        if step == "start":
            graph = gated_agent(gate, scripted(tool_call("deploy", DEPLOY_ARGUMENTS), AIMessage(content="Deployed.")), ledger, SqliteSaver(connection))
            result = graph.invoke(request, config)
        else:
            # A new process: the model's next answer is its last one; the graph's state comes from the checkpoint.
            graph = gated_agent(gate, scripted(AIMessage(content="Deployed.")), ledger, SqliteSaver(connection))
            interrupts = graph.get_state(config).interrupts
            result = graph.invoke(wait_for_decisions(gate, interrupts, total_timeout=30), config)
    print(
        json.dumps(
            {
                "interrupts": [item.value for item in approval_requests(result.get("__interrupt__", []))],
                "ran": ledger.calls,
                "messages": [[message.type, message.content] for message in result["messages"]],
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
