"""LangGraph: Herald's tools as LangChain tools, and an approval gate that pauses the graph with
``interrupt`` while a person decides, so a run survives a process restart (with a checkpointer).

    tools = [*herald_tools(herald), gated(deploy, gate)]
    result = graph.invoke(inputs, config)            # pauses at a gated call needing a person
    while "__interrupt__" in result:
        result = graph.invoke(wait_for_decisions(gate, result["__interrupt__"]), config)
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, run_in_executor
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command, Interrupt, interrupt

from herald_sdk import Herald

from .gate import Gate, GateResult, with_approval
from .tools import HeraldTool, herald_tool_definitions

#: The ``type`` of the value of the interrupts the gate raises.
APPROVAL_INTERRUPT = "herald_approval"


def _structured(tool: HeraldTool) -> BaseTool:
    def run(**arguments: Any) -> str:
        return tool.run(arguments)

    return StructuredTool.from_function(func=run, name=tool.name, description=tool.description, args_schema=tool.arguments)


def herald_tools(herald: Herald, *, agent_name: str | None = None, ask_timeout: float = 600.0) -> list[BaseTool]:
    """``send_notification`` and ``ask_user``, as in Herald's MCP server. ``ask_user`` waits for
    the answer across the server's windows up to ``ask_timeout`` seconds."""
    return [_structured(tool) for tool in herald_tool_definitions(herald, agent_name=agent_name, ask_timeout=ask_timeout)]


class HeraldGatedTool(BaseTool):
    """A tool that runs only when Herald lets it: see ``gated``."""

    wrapped: BaseTool
    gate: Gate

    def invoke(self, input: str | dict[str, Any] | ToolCall, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        # ToolNode passes a ToolCall ({name, args, id, type}); its id keys the decision.
        is_call = isinstance(input, dict) and input.get("type") == "tool_call"
        arguments = input["args"] if is_call and isinstance(input, dict) else input
        call_id = str(input["id"]) if is_call and isinstance(input, dict) else None
        if not isinstance(arguments, dict):
            arguments = {"input": arguments}
        config = ensure_config(config)
        result = self._ruling(arguments, call_id, config)
        if not result.approved:
            if call_id is None:
                return result.reason
            return ToolMessage(content=result.reason, tool_call_id=call_id, name=self.name, status="error")
        output = self.wrapped.invoke(input, config, **kwargs)
        if isinstance(output, ToolMessage):
            # Invoked with the tool call, the tool answers with its ToolMessage: the model is given its content.
            return output.model_copy(update={"content": with_approval(result, output.content)})
        return with_approval(result, output)

    async def ainvoke(self, input: str | dict[str, Any] | ToolCall, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        # The gate's requests are blocking; interrupt() reads the graph's context, which the executor carries over.
        return await run_in_executor(config, self.invoke, input, config, **kwargs)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a gated tool runs through invoke(), where the gate is")

    def _ruling(self, arguments: Mapping[str, object], call_id: str | None, config: RunnableConfig) -> GateResult:
        thread = config.get("configurable", {}).get("thread_id")
        key = None if call_id is None else f"langgraph:{thread}:{call_id}"
        result = self.gate.evaluate(self.name, arguments, call_id=key)
        if result.status != "pending" or result.decision is None:
            return result
        decision = result.decision
        # First pass: pauses the graph here. On resume the node runs again from its start: the
        # evaluation above finds the same decision; if it is still open, interrupt() returns the
        # resume value and one more read decides (still open: refused).
        interrupt(
            {
                "type": APPROVAL_INTERRUPT,
                "decisionId": decision["decisionId"],
                "decisionPageUrl": decision["decisionPageUrl"],
                "question": decision["question"],
                "toolName": self.name,
                "arguments": dict(arguments),
            }
        )
        return self.gate.reread(result, self.name, arguments)


def gated(tool: BaseTool, gate: Gate) -> HeraldGatedTool:
    """Wraps a tool: each call is evaluated with POST /authorize (its name and exact arguments).
    allow runs it; deny answers the agent with the policy's reason; requires_human opens a
    decision bound to those arguments and pauses the graph (``interrupt``) until the run is resumed.
    Only a yes runs the tool, with the arguments that were approved, and the model is given who
    approved with its output (``with_approval``). Herald's errors are raised as
    the SDK's typed errors. Needs a checkpointer, as every interrupt does."""
    return HeraldGatedTool(name=tool.name, description=tool.description, args_schema=tool.args_schema, wrapped=tool, gate=gate)


def approval_requests(interrupts: Sequence[Interrupt[Any]]) -> list[Interrupt[Any]]:
    """The interrupts the gate raised (the others are the application's own)."""
    return [item for item in interrupts if isinstance(item.value, dict) and item.value.get("type") == APPROVAL_INTERRUPT]


def wait_for_decisions(gate: Gate, interrupts: Sequence[Interrupt[Any]], *, total_timeout: float | None = None) -> Command[Any]:
    """Waits (across the server's 55-second holds, up to ``total_timeout`` seconds in all, default
    the gate's) until each of the gate's decisions is resolved, then gives the Command that
    resumes the graph. The resume value is only a wake-up: the gated tool reads the decision from
    Herald itself, so resuming early, or with any value, can never approve a call."""
    deadline = time.monotonic() + (gate.total_timeout if total_timeout is None else total_timeout)
    resume: dict[str, Any] = {}
    for item in approval_requests(interrupts):
        decision = gate.herald.get_decision(item.value["decisionId"])
        decided = gate.herald.wait_for_decision(decision, total_timeout=max(0.0, deadline - time.monotonic()))
        resume[item.id] = decided["status"]
    return Command(resume=resume)
