"""Request and response shapes of Herald's server API (the JSON field names, as README.md describes them).

Not written here: each shape of the API is generated into _generated.py by `npm run generate`, from
the OpenAPI document the gateway builds out of its route schemas, so the SDK cannot drift from what
the server validates and returns. What is no route's shape is written below."""

from __future__ import annotations

from typing import Any, TypedDict

from ._generated import *  # noqa: F403 (the API's shapes, under these names)
from ._generated import Decision, DecisionAnsweredBy, DecisionRequestApprovers, DecisionRequestEscalation, Verdict

#: Who may answer a question (``approvers`` of ask and create_decision).
Approver = DecisionRequestApprovers
#: One step of a question's ``escalation``.
EscalationStep = DecisionRequestEscalation
#: Who answered a question: ``answeredBy`` of its record once answered.
AnsweredBy = DecisionAnsweredBy


class AuthorizeThenDecideResult(TypedDict):
    """What Herald.authorize_then_decide returns: one verdict, and the decision it opened."""

    #: True only for allow, or requires_human and a person's explicit yes. Silence is never approval.
    approved: bool
    authorization: Verdict
    #: The decision opened on requires_human, as it stood when the wait ended; None otherwise.
    decision: Decision | None


class WebhookEvent(TypedDict):
    """What a webhook's body holds (Standard Webhooks): not a route of the API."""

    type: str
    timestamp: str
    data: dict[str, Any]
