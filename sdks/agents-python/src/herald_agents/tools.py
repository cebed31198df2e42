"""The two tools every adapter offers, named and shaped as Herald's MCP tools: their argument
models (pydantic, which every supported framework already brings) and what they do, once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from herald_sdk import Herald
from herald_sdk.types import AskRecord, AskRequest, SendRequest, SendResult
from pydantic import BaseModel, ConfigDict, Field

from ._generated import AskApprovers, AskContext, AskEscalation, AskOptions, AskPlaceholder, AskQuestion, AskType, SendBody, SendTitle, SendUrl

SEND_NOTIFICATION = "send_notification"
ASK_USER = "ask_user"

SEND_NOTIFICATION_DESCRIPTION = (
    "Send a push notification to the person: their phone app and the browsers subscribed to this workspace. "
    "Use it to tell them something that needs no answer (a long task finished, a build failed). "
    'Returns {success, status: "queued", campaignId, sent, limits}. To get an answer, use ask_user instead.'
)
ASK_USER_DESCRIPTION = (
    "Ask the person a question and wait for the answer. Fail closed: only an explicit \"yes\" to a confirm question approves; "
    'no answer is never approval. type: "confirm" (yes/no, the default), "select" (one of 2-20 options) or "input" (free text). '
    'Result: {correlationId, status: "answered" | "timeout" | "withdrawn", answered, value, answeredBy, ...}; value is the answer ("yes"/"no" for confirm), answeredBy who gave it ({kind, id, displayName, channel, at}). '
    'approvers: only these people may answer ([{kind: "email" | "slack" | "subscriber" | "key" | "member", id}]); escalation: more channels and approvers while it stays unanswered. '
    '"timeout" means nobody answered in time: treat it as not approved.'
)


class SendNotificationArguments(BaseModel):
    """The fields /send takes, bounded as the API bounds them (_generated.py), and context."""

    model_config = ConfigDict(extra="forbid")

    title: SendTitle = Field(description='The headline, e.g. "Deploy finished"')
    body: SendBody = Field(description="The message")
    url: SendUrl | None = Field(default=None, description="http(s) link opened when the notification is tapped")
    context: str | None = Field(
        default=None, min_length=1, max_length=2_000, description="More detail; appended to the body after a blank line (body and context together at most 2,048 characters)"
    )


class AskUserArguments(BaseModel):
    """The fields of /ask a question is made of, bounded as the API bounds them (_generated.py)."""

    model_config = ConfigDict(extra="forbid")

    question: AskQuestion = Field(description="What the person is asked")
    type: AskType | None = Field(default=None, description="confirm (default), select or input")
    options: AskOptions | None = Field(default=None, description="The choices (select only)")
    context: AskContext | None = Field(default=None, description="Background shown with the question")
    placeholder: AskPlaceholder | None = Field(default=None, description="Hint inside the text field (input)")
    approvers: AskApprovers | None = Field(
        default=None, description="Who may answer. When named, an answer from anyone else is refused (403); each is delivered the question on their channel."
    )
    escalation: AskEscalation | None = Field(
        default=None, description="While the question stays unanswered, deliver it at each step to more channels and approvers (never extends its lifetime)"
    )


def send_notification(herald: Herald, arguments: SendNotificationArguments) -> SendResult:
    """One POST /send; the context goes after the body, as the MCP tool does."""
    text = arguments.body if arguments.context is None else f"{arguments.body}\n\n{arguments.context}"
    request: SendRequest = {"title": arguments.title, "body": text}
    if arguments.url is not None:
        request["url"] = arguments.url
    return herald.send(request)


def ask_user(herald: Herald, arguments: AskUserArguments, *, agent_name: str | None, total_timeout: float) -> AskRecord:
    """Asks, then waits across the server's 55-second windows up to ``total_timeout`` seconds (the
    question is asked without a hold, so its record and link exist from the first moment)."""
    question: AskRequest = {"question": arguments.question, "wait": False}
    if arguments.type is not None:
        question["type"] = arguments.type
    if arguments.options is not None:
        question["options"] = arguments.options
    if arguments.context is not None:
        question["context"] = arguments.context
    if arguments.placeholder is not None:
        question["placeholder"] = arguments.placeholder
    if arguments.approvers is not None:
        question["approvers"] = arguments.approvers
    if arguments.escalation is not None:
        question["escalation"] = arguments.escalation
    if agent_name is not None:
        question["agentName"] = agent_name
    return herald.wait_for_ask(herald.ask(question), total_timeout=total_timeout)


@dataclass(frozen=True)
class HeraldTool:
    """One tool as every adapter builds it: name, description, argument model, and what it does
    (the arguments as the framework passes them, validated here; the result as JSON text)."""

    name: str
    description: str
    arguments: type[BaseModel]
    run: Callable[[Mapping[str, Any]], str]


def herald_tool_definitions(herald: Herald, *, agent_name: str | None, ask_timeout: float) -> list[HeraldTool]:
    """``send_notification`` and ``ask_user``; ``ask_user`` waits up to ``ask_timeout`` seconds."""

    def send(arguments: Mapping[str, Any]) -> str:
        return json.dumps(send_notification(herald, SendNotificationArguments.model_validate(arguments)))

    def ask(arguments: Mapping[str, Any]) -> str:
        return json.dumps(ask_user(herald, AskUserArguments.model_validate(arguments), agent_name=agent_name, total_timeout=ask_timeout))

    return [
        HeraldTool(SEND_NOTIFICATION, SEND_NOTIFICATION_DESCRIPTION, SendNotificationArguments, send),
        HeraldTool(ASK_USER, ASK_USER_DESCRIPTION, AskUserArguments, ask),
    ]
