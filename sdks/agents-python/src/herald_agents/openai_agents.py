"""The OpenAI Agents SDK: Herald's tools as FunctionTools, and an approval gate that plugs into
the SDK's own tool approval (``needs_approval``: the run stops with ``interruptions``), so a
paused run can be saved (``RunState.to_string``) and resumed by another process.

    agent = Agent(name="Deployer", tools=[*herald_tools(herald), gated(deploy, gate)])
    result = await Runner.run(agent, "Deploy the api")
    while result.interruptions:
        result = await Runner.run(agent, await decide_approvals(gate, result.to_state()))
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from agents import FunctionTool, RunContextWrapper, RunState
from agents.tool_context import ToolContext
from pydantic import ValidationError

from herald_sdk import Herald

from .gate import Gate, GateResult, with_approval
from .tools import HeraldTool, herald_tool_definitions


def _function_tool(tool: HeraldTool) -> FunctionTool:
    async def invoke(context: ToolContext[Any], raw: str) -> str:
        try:
            arguments = tool.arguments.model_validate_json(raw or "{}").model_dump(exclude_none=True)
        except ValidationError as err:
            return f"Invalid arguments for {tool.name}: {err}"
        return await asyncio.to_thread(tool.run, arguments)

    # Not strict: the optional arguments may be left out, as in MCP.
    return FunctionTool(name=tool.name, description=tool.description, params_json_schema=tool.arguments.model_json_schema(), on_invoke_tool=invoke, strict_json_schema=False)


def herald_tools(herald: Herald, *, agent_name: str | None = None, ask_timeout: float = 600.0) -> list[FunctionTool]:
    """``send_notification`` and ``ask_user``, as in Herald's MCP server. ``ask_user`` waits for
    the answer across the server's windows up to ``ask_timeout`` seconds. Arguments that do not
    fit the schema are answered to the model as the validation error; Herald's errors fail the run."""
    return [_function_tool(tool) for tool in herald_tool_definitions(herald, agent_name=agent_name, ask_timeout=ask_timeout)]


def _call_key(call_id: str) -> str:
    return f"openai-agents:{call_id}"


def _arguments(raw: str | None) -> dict[str, Any]:
    parsed = json.loads(raw) if raw else {}
    return parsed if isinstance(parsed, dict) else {"input": parsed}


def gated(tool: FunctionTool, gate: Gate) -> FunctionTool:
    """The tool, behind Herald: each call is evaluated with POST /authorize (its name and exact
    arguments). allow runs it; deny answers the model with the policy's reason; requires_human
    opens a decision bound to those arguments and stops the run for approval (the SDK's
    ``interruptions``; decide them with ``decide_approvals``). When the tool is about to run, its
    call is evaluated once more and runs only if allowed or approved in Herald, whatever the
    RunState says: approving the interruption by hand cannot run it. Herald's errors fail the run
    (the Agents SDK's UserError, whose ``__cause__`` is the Herald SDK's typed error); nothing is
    retried. Relies on the model's call ids being unique, as providers make them."""
    # The evaluation made when the call was proposed, used once when it runs (same process only).
    proposed: dict[str, tuple[str, GateResult]] = {}

    async def needs_approval(context: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str) -> bool:
        result = await asyncio.to_thread(gate.evaluate, tool.name, arguments, call_id=_call_key(call_id))
        if result.status == "pending":
            return True
        proposed[call_id] = (json.dumps(arguments, sort_keys=True), result)
        return False

    async def invoke(context: ToolContext[Any], raw: str) -> Any:
        arguments = _arguments(raw)
        earlier = proposed.pop(context.tool_call_id, None)
        if earlier is not None and earlier[0] == json.dumps(arguments, sort_keys=True):
            result = earlier[1]
        else:
            result = await asyncio.to_thread(gate.evaluate, tool.name, arguments, call_id=_call_key(context.tool_call_id))
        # Never a wait inside the tool: an open decision here means nobody approved it.
        result = gate.settle(result)
        if not result.approved:
            return result.reason
        return with_approval(result, await tool.on_invoke_tool(context, raw))

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.params_json_schema,
        on_invoke_tool=invoke,
        strict_json_schema=tool.strict_json_schema,
        is_enabled=tool.is_enabled,
        needs_approval=needs_approval,
    )


async def decide_approvals(gate: Gate, state: RunState[Any], *, total_timeout: float | None = None) -> RunState[Any]:
    """Waits (across the server's 55-second holds, up to ``total_timeout`` seconds in all, default
    the gate's) for Herald's decision on each approval the run stopped for, then approves it
    only for a yes about that exact call and rejects it otherwise, with the reason the model sees.
    Every interruption of the run is decided in Herald (a tool with ``needs_approval=True`` too).
    Returns the state to pass to ``Runner.run``."""
    deadline = time.monotonic() + (gate.total_timeout if total_timeout is None else total_timeout)
    for item in state.get_interruptions():
        tool_name, call_id = item.tool_name, item.call_id
        if tool_name is None or call_id is None:
            state.reject(item, rejection_message="Refused: the approval request names no tool call.")
            continue
        arguments = _arguments(item.arguments)
        evaluated = await asyncio.to_thread(gate.evaluate, tool_name, arguments, call_id=_call_key(call_id))
        result = await asyncio.to_thread(gate.wait, evaluated, tool_name, arguments, total_timeout=max(0.0, deadline - time.monotonic()))
        if result.approved:
            state.approve(item)
        else:
            state.reject(item, rejection_message=result.reason)
    return state
