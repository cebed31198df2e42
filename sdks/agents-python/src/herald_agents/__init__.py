"""Herald for agent frameworks: the approval gate they share (herald_agents.gate) and one module
per framework: herald_agents.langgraph, herald_agents.crewai, herald_agents.openai_agents, each
needing its extra (``pip install "herald-agents[langgraph]"``)."""

from .gate import Gate, GateResult, UnboundArguments, tool_parameters

__all__ = ["Gate", "GateResult", "UnboundArguments", "tool_parameters"]
