"""CrewAI: Herald's tools as CrewAI tools, and an approval gate around any CrewAI tool.

CrewAI has no way to pause a run for a person and resume it later, so a gated call waits inside
the tool, across the server's 55-second holds, until the decision is resolved or the gate's
``total_timeout`` passes (then it is refused).

    agent = Agent(role="Deployer", ..., tools=[*herald_tools(herald), gated(DeployTool(), gate)])
"""

from __future__ import annotations

from typing import Any

from crewai.tools import BaseTool

from herald_sdk import Herald, HeraldError

from .gate import Gate, with_approval
from .tools import HeraldTool, herald_tool_definitions


def never_cache(_arguments: Any = None, _result: Any = None) -> bool:
    """Every call is evaluated afresh: an approval or a refusal is never replayed from CrewAI's cache."""
    return False


def _described(err: HeraldError) -> str:
    return f"{type(err).__name__} ({err.status} {err.code}): {err.message}"


class HeraldCrewTool(BaseTool):
    """A Herald tool as a CrewAI tool. CrewAI calls a tool again when it raises, and shows the
    model the error's text; a request to Herald is never repeated on its own (a notification
    would be sent twice), so Herald's errors are answered as text at once and kept, as the SDK's
    typed error, in ``last_error``."""

    tool: HeraldTool
    last_error: HeraldError | None = None

    def _run(self, **arguments: Any) -> str:
        try:
            return self.tool.run(arguments)
        except HeraldError as err:
            self.last_error = err
            return f"Failed: Herald answered {_described(err)}"


def herald_tools(herald: Herald, *, agent_name: str | None = None, ask_timeout: float = 600.0) -> list[BaseTool]:
    """``send_notification`` and ``ask_user``, as in Herald's MCP server. ``ask_user`` waits for
    the answer across the server's windows up to ``ask_timeout`` seconds."""
    return [
        HeraldCrewTool(name=tool.name, description=tool.description, args_schema=tool.arguments, tool=tool, cache_function=never_cache)
        for tool in herald_tool_definitions(herald, agent_name=agent_name, ask_timeout=ask_timeout)
    ]


class HeraldGatedTool(BaseTool):
    """A tool that runs only when Herald lets it: see ``gated``."""

    wrapped: BaseTool
    gate: Gate
    #: The SDK's typed error of the last call Herald could not evaluate (CrewAI turns a tool's
    #: exceptions into text for the model, and calls the tool again, so the gate refuses instead).
    last_error: HeraldError | None = None

    def _run(self, **arguments: Any) -> Any:
        try:
            result = self.gate.check(self.name, arguments)
        except HeraldError as err:
            self.last_error = err
            return f"Refused: Herald could not evaluate the call: {_described(err)}"
        if not result.approved:
            return result.reason
        return with_approval(result, self.wrapped.run(**arguments))


def gated(tool: BaseTool, gate: Gate) -> HeraldGatedTool:
    """Wraps a CrewAI tool: each call is evaluated with POST /authorize (its name and exact
    arguments). allow runs it; deny answers the agent with the policy's reason; requires_human
    opens a decision bound to those arguments and waits for it (``gate.total_timeout``). Only a
    yes runs the tool, with the arguments that were approved; no, a cancellation, an expiry,
    silence and any error refuse (the error is kept in ``last_error``)."""
    return HeraldGatedTool(name=tool.name, description=tool.description, args_schema=tool.args_schema, wrapped=tool, gate=gate, cache_function=never_cache)
