"""The approval gate every framework adapter shares: one tool call in, a ruling out.

A call is evaluated with ``POST /authorize`` (the tool's name and its exact arguments): ``allow``
runs it, ``deny`` refuses it with the policy's reason, ``requires_human`` opens a decision bound to
those exact arguments. Only a decision answered yes, about this tool and these arguments, runs the
tool; an answer no, a cancellation, an expiry or no answer at all refuses it. Herald's errors are
raised as the SDK's typed errors (the tool does not run either).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Callable, Literal, Mapping, Sequence

from herald_sdk import Herald
from herald_sdk.types import Approver, AuthorizeRequest, Decision, DecisionRequest, Scalar, Verdict

#: The server's bounds on ``parameters`` (README, POST /authorize).
MAX_PARAMETERS = 32
MAX_PARAMETER_NAME = 64
MAX_PARAMETER_STRING = 1_000
_MAX_QUESTION = 500
_MAX_CONTEXT = 2_000
_MAX_IDEMPOTENCY_KEY = 200

Audience = Literal["user", "owner", "team"]
Status = Literal["approved", "refused", "pending"]


class UnboundArguments(ValueError):
    """The arguments cannot be sent as ``parameters``, so no approval could be bound to them."""


def tool_parameters(arguments: Mapping[str, object]) -> dict[str, Scalar]:
    """The tool's arguments as Herald ``parameters``: scalars as they are, anything nested as its
    JSON text (keys sorted), so the policy sees and the person approves exactly these values.
    Raises UnboundArguments past the server's bounds rather than sending less than the call."""
    if len(arguments) > MAX_PARAMETERS:
        raise UnboundArguments(f"{len(arguments)} arguments; an approval binds at most {MAX_PARAMETERS}")
    parameters: dict[str, Scalar] = {}
    for name, value in arguments.items():
        if not 1 <= len(name) <= MAX_PARAMETER_NAME:
            raise UnboundArguments(f"argument name {name[:80]!r} is not 1-{MAX_PARAMETER_NAME} characters")
        if value is None or isinstance(value, (str, int, float, bool)):
            bound: Scalar = value
        else:
            try:
                bound = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            except (TypeError, ValueError) as err:
                raise UnboundArguments(f"argument {name!r} is not JSON: {err}") from None
        if isinstance(bound, str) and len(bound) > MAX_PARAMETER_STRING:
            raise UnboundArguments(f"argument {name!r} is longer than {MAX_PARAMETER_STRING} characters")
        parameters[name] = bound
    return parameters


@dataclass(frozen=True)
class GateResult:
    """The gate's ruling on one tool call."""

    #: approved: run the tool with the arguments it was given (the ones approved); refused: do not
    #: run it, and tell the agent ``reason``; pending: a decision waits for a person.
    status: Status
    #: Why, in a sentence the agent can be shown.
    reason: str
    #: The /authorize verdict; None when the arguments could not be bound.
    authorization: Verdict | None = None
    #: The decision opened on requires_human, as last read.
    decision: Decision | None = None

    @property
    def approved(self) -> bool:
        return self.status == "approved"


def _answerer_of(decision: Decision) -> str:
    """Who answered a decision, as the agent is told: the display name, the kind and, where it is
    not the kind's own, the channel: "ops@example.com (email)", "alice (subscriber via web_push)",
    "key_… (key via api)"; "the holder of the answer link" (a question without approvers answered
    through its link), or "the person" for an answer recorded before Herald said who."""
    by = decision["answeredBy"]
    if by is None:
        return "the person"
    if by["kind"] == "link":
        return by["displayName"]
    via = "" if by["channel"] == by["kind"] else f" via {by['channel']}"
    return f"{by['displayName']} ({by['kind']}{via})"


def with_approval(result: GateResult, output: object) -> object:
    """A cleared call's output as the agent is given it: after a person's yes, who approved it with
    the tool's output, as JSON text (``{"approval": "Approved by ops@example.com (email).", "result":
    <output>}``); after the policy's allow (no decision), the output alone."""
    if result.decision is None:
        return output
    return json.dumps({"approval": result.reason, "result": output}, ensure_ascii=False, default=str)


def _refused(reason: str, authorization: Verdict | None = None, decision: Decision | None = None) -> GateResult:
    return GateResult("refused", reason, authorization, decision)


def _default_question(tool_name: str, arguments: Mapping[str, object]) -> str:
    return f"Allow the agent to call {tool_name}?"


class Gate:
    """Evaluates tool calls for one agent. Each method is a few single requests of the SDK's
    client (which never retries); waits go across the server's 55-second holds."""

    def __init__(
        self,
        herald: Herald,
        *,
        question: Callable[[str, Mapping[str, object]], str] = _default_question,
        agent_name: str | None = None,
        external_id: str | None = None,
        audience: Audience | None = None,
        approvers: Sequence[Approver] | None = None,
        actor: str | None = None,
        environment: str | None = None,
        tool_target: Callable[[str, Mapping[str, object]], str | None] | None = None,
        expires_in_seconds: int | None = None,
        total_timeout: float = 3_600.0,
    ) -> None:
        """``question``: the text the person is asked, from the tool's name and arguments (the
        arguments themselves are shown as the decision's context). ``external_id``/``audience``:
        who decides (default: the key's owner, or a bound key's own end-user). ``approvers``: the
        people who may approve this agent's calls (up to 20 ``{"kind", "id"}``), sent with each
        decision: each is delivered it on their channel, and an answer from anyone else is refused. ``actor``,
        ``environment``, ``tool_target``: more for the policy to match on. ``expires_in_seconds``:
        how long the decision stays answerable (60-86,400; default 3,600). ``total_timeout``: how
        long a blocking wait lasts before silence refuses the call."""
        self.herald = herald
        self._question = question
        self._agent_name = agent_name
        self._external_id = external_id
        self._audience = audience
        self._approvers = None if approvers is None else list(approvers)
        self._actor = actor
        self._environment = environment
        self._tool_target = tool_target
        self._expires_in_seconds = expires_in_seconds
        self.total_timeout = total_timeout

    # ---- The steps ----

    def action(self, tool_name: str, arguments: Mapping[str, object]) -> AuthorizeRequest:
        """The /authorize body for a call (raises UnboundArguments)."""
        action: AuthorizeRequest = {"toolName": tool_name, "parameters": tool_parameters(arguments)}
        target = self._tool_target(tool_name, arguments) if self._tool_target else None
        if target is not None:
            action["toolTarget"] = target
        if self._actor is not None:
            action["actor"] = self._actor
        if self._environment is not None:
            action["environment"] = self._environment
        if self._external_id is not None:
            action["externalId"] = self._external_id
        return action

    def evaluate(self, tool_name: str, arguments: Mapping[str, object], *, call_id: str | None = None) -> GateResult:
        """Authorizes the call; on requires_human opens its decision without waiting (``pending``).
        With ``call_id`` (the framework's id of this tool call) the decision's idempotency key is
        derived from it and the call, so evaluating the same call again, after a restart too,
        finds the same decision as it stands instead of opening another."""
        try:
            action = self.action(tool_name, arguments)
        except UnboundArguments as err:
            return _refused(f"Refused: {err}, so it cannot be authorized.")
        authorization = self.herald.authorize(action)
        if authorization["verdict"] == "allow":
            return GateResult("approved", authorization["reason"], authorization)
        if authorization["verdict"] == "deny":
            return _refused(f"Refused by policy: {authorization['reason']}.", authorization)
        key = None if call_id is None else _idempotency_key(call_id, action)
        decision = self.herald.create_decision(self._decision_request(action, arguments), idempotency_key=key)
        return self.judge(tool_name, arguments, decision, authorization)

    def judge(self, tool_name: str, arguments: Mapping[str, object], decision: Decision, authorization: Verdict | None = None) -> GateResult:
        """A decision's ruling on this exact call: approved only for a yes about this tool and
        these arguments; a decision still open is ``pending``."""
        if decision["status"] == "pending":
            return GateResult("pending", f"Waiting for a person to answer: {decision['decisionPageUrl']}", authorization, decision)
        if decision["status"] == "cancelled":
            return _refused("Refused: the approval request was cancelled.", authorization, decision)
        if decision["status"] == "expired":
            return _refused("Refused: nobody answered before the approval request expired.", authorization, decision)
        if not decision["approved"]:
            return _refused(f"Refused: {_answerer_of(decision)} answered {decision['answer']!r}.", authorization, decision)
        try:
            bound = self.action(tool_name, arguments)
        except UnboundArguments as err:
            return _refused(f"Refused: {err}.", authorization, decision)
        if decision["toolName"] != tool_name or (decision["parameters"] or {}) != bound.get("parameters", {}) or decision["toolTarget"] != bound.get("toolTarget"):
            return _refused("Refused: the approval was given for a different tool call.", authorization, decision)
        return GateResult("approved", f"Approved by {_answerer_of(decision)}.", authorization, decision)

    def wait(self, result: GateResult, tool_name: str, arguments: Mapping[str, object], *, total_timeout: float | None = None) -> GateResult:
        """Waits on a ``pending`` result's decision (across 55-second holds) up to
        ``total_timeout`` (default the gate's); still unanswered then is a refusal."""
        if result.status != "pending" or result.decision is None:
            return result
        budget = self.total_timeout if total_timeout is None else total_timeout
        decided = self.herald.wait_for_decision(result.decision, total_timeout=budget)
        return self.settle(self.judge(tool_name, arguments, decided, result.authorization))

    def reread(self, result: GateResult, tool_name: str, arguments: Mapping[str, object]) -> GateResult:
        """Reads a ``pending`` result's decision once more (when a paused run is resumed)."""
        if result.status != "pending" or result.decision is None:
            return result
        decision = self.herald.get_decision(result.decision["decisionId"])
        return self.settle(self.judge(tool_name, arguments, decision, result.authorization))

    @staticmethod
    def settle(result: GateResult) -> GateResult:
        """A result that must be final now: still pending is a refusal (silence is never approval)."""
        if result.status != "pending":
            return result
        return _refused("Refused: nobody approved the call in time (no answer is never approval).", result.authorization, result.decision)

    def check(self, tool_name: str, arguments: Mapping[str, object], *, call_id: str | None = None, total_timeout: float | None = None) -> GateResult:
        """Evaluates and, on requires_human, blocks until the decision is resolved or the budget
        ends: approved or refused, never pending. For frameworks without a way to pause a run."""
        started = time.monotonic()
        result = self.evaluate(tool_name, arguments, call_id=call_id)
        budget = (self.total_timeout if total_timeout is None else total_timeout) - (time.monotonic() - started)
        return self.wait(result, tool_name, arguments, total_timeout=max(0.0, budget))

    def _decision_request(self, action: AuthorizeRequest, arguments: Mapping[str, object]) -> DecisionRequest:
        tool_name = action["toolName"]
        request: DecisionRequest = {
            "question": self._question(tool_name, arguments)[:_MAX_QUESTION],
            "type": "confirm",
            "context": _shown(tool_name, arguments),
            "toolName": tool_name,
            "parameters": action.get("parameters", {}),
        }
        if "toolTarget" in action:
            request["toolTarget"] = action["toolTarget"]
        if self._agent_name is not None:
            request["agentName"] = self._agent_name
        if self._external_id is not None:
            request["externalId"] = self._external_id
        if self._audience is not None:
            request["audience"] = self._audience
        if self._approvers is not None:
            request["approvers"] = self._approvers
        if self._expires_in_seconds is not None:
            request["expiresInSeconds"] = self._expires_in_seconds
        return request


def _shown(tool_name: str, arguments: Mapping[str, object]) -> str:
    """The call as the person reads it beside the question (cut to the server's 2,000 characters)."""
    text = f"{tool_name}({json.dumps(dict(arguments), sort_keys=True, ensure_ascii=False, default=str)})"
    return text if len(text) <= _MAX_CONTEXT else f"{text[: _MAX_CONTEXT - 1]}…"


def _idempotency_key(call_id: str, action: AuthorizeRequest) -> str:
    """One key per tool call and its exact action: the same call evaluated again (a resumed run)
    finds its decision; a different call can never reuse it."""
    digest = hashlib.sha256(json.dumps({"call": call_id, "action": action}, sort_keys=True).encode()).hexdigest()
    return f"herald-agents-{digest}"[:_MAX_IDEMPOTENCY_KEY]
