"""A client for Herald's ``/api/v1/server`` on the standard library (urllib)."""

from __future__ import annotations

import email.utils
import json
import math
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping, TypeVar, cast

from .errors import APIConnectionError, RequestTimeoutError, error_for
from .types import (
    AskPage,
    AskRecord,
    AskRequest,
    AuthorizeRequest,
    AuthorizeThenDecideResult,
    BoundKey,
    Campaign,
    CampaignPage,
    CampaignStats,
    CampaignStatsSeries,
    CampaignUpdate,
    Channels,
    CreateCampaignRequest,
    CreateFlowRequest,
    CreatedKey,
    CreateKeyRequest,
    CreateSegmentRequest,
    CreateTemplateRequest,
    Decision,
    DecisionPage,
    QuestionEventPage,
    DecisionQuestion,
    DecisionRequest,
    Enrollment,
    EvaluatePolicyRequest,
    Flow,
    FlowPage,
    FlowRunPage,
    FlowStatus,
    FlowUpdate,
    Identity,
    IdentitySecret,
    ConnectSlackRequest,
    SlackConnection,
    Machine,
    MachineReport,
    Notification,
    Pairing,
    PersonReachability,
    PolicyDocument,
    PolicyEvaluation,
    PolicyVersionPage,
    PolicyVersionText,
    RecipientPage,
    RecipientStatus,
    SendRequest,
    SendResult,
    Site,
    SubscriberCounts,
    SubscriberDetail,
    Segment,
    SegmentCount,
    SegmentPage,
    SegmentUpdate,
    SubscriberPage,
    SubscriberStatus,
    SubscriberUpdate,
    Template,
    TemplatePage,
    TemplateUpdate,
    Verdict,
    WebhookSecret,
)

T = TypeVar("T")

SERVER_API = "/api/v1/server"
#: The longest a request is held open for an answer by the server.
MAX_WAIT_SECONDS = 55
#: A held request's own time-out: the hold plus room for the network, whatever the client's default.
_HOLD_MARGIN_SECONDS = 15
_HOLD_TIMEOUT = MAX_WAIT_SECONDS + _HOLD_MARGIN_SECONDS


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Herald's API never redirects; following one would resend the key elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def _retry_after(header: str | None) -> int | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if header is None:
        return None
    if header.strip().isdigit():
        return int(header)
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return max(0, math.ceil(when.timestamp() - time.time()))


def _query(params: Mapping[str, str | int | None]) -> str:
    present = {name: str(value) for name, value in params.items() if value is not None}
    return f"?{urllib.parse.urlencode(present)}" if present else ""


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


class Herald:
    """Each method is one HTTP request and never retries on its own: a 429 or 5xx is raised
    (RateLimitError, ServerError) for the caller to decide."""

    def __init__(self, api_key: str | None = None, base_url: str | None = None, *, timeout: float = 75.0, headers: Mapping[str, str] | None = None) -> None:
        """``api_key``: a full key ``pk_<id>.<secret>``, default ``HERALD_API_KEY`` (keep it in the
        environment). ``base_url``: Herald's origin, default ``HERALD_URL``, else
        ``http://localhost:8080``. ``timeout``: the default per-request time-out in seconds, above
        the server's longest hold (55 s). ``headers``: sent with every request (e.g. X-Herald-Machine-Id)."""
        key = api_key or os.environ.get("HERALD_API_KEY")
        if not key:
            raise ValueError("No API key: pass api_key or set HERALD_API_KEY")
        self._api_key = key
        self._base_url = (base_url or os.environ.get("HERALD_URL") or "http://localhost:8080").rstrip("/")
        self._timeout = timeout
        self._headers = dict(headers or {})

    def request(self, method: str, path: str, body: object = None, *, timeout: float | None = None, headers: Mapping[str, str] | None = None) -> Any:
        """One request: the parsed JSON body (None for 204), or a HeraldError subclass."""
        request_headers = {**self._headers, **(headers or {}), "Authorization": f"Bearer {self._api_key}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            request_headers["Content-Type"] = "application/json"
        request = urllib.request.Request(f"{self._base_url}{SERVER_API}{path}", data=data, headers=request_headers, method=method)
        limit = self._timeout if timeout is None else timeout
        try:
            with _opener.open(request, timeout=limit) as response:
                text = response.read().decode()
                return json.loads(text) if text else None
        except urllib.error.HTTPError as answer:
            raw = answer.read().decode()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            error_body = cast(dict[str, Any], parsed) if isinstance(parsed, dict) else {"error": raw}
            raise error_for(answer.code, error_body, _retry_after(answer.headers.get("Retry-After"))) from None
        except (TimeoutError, socket.timeout) as err:
            raise RequestTimeoutError(0, {"code": "timeout", "error": f"No answer within {limit} s"}) from err
        except urllib.error.URLError as err:
            if isinstance(err.reason, (TimeoutError, socket.timeout)):
                raise RequestTimeoutError(0, {"code": "timeout", "error": f"No answer within {limit} s"}) from err
            raise APIConnectionError(0, {"code": "connection_error", "error": str(err.reason)}) from err
        except OSError as err:
            raise APIConnectionError(0, {"code": "connection_error", "error": str(err)}) from err

    # ---- Account ----

    def get_identity(self, *, timeout: float | None = None) -> Identity:
        return cast(Identity, self.request("GET", "/identity", timeout=timeout))

    def get_site(self, *, timeout: float | None = None) -> Site:
        return cast(Site, self.request("GET", "/site", timeout=timeout))

    def get_channels(self, *, timeout: float | None = None) -> Channels:
        return cast(Channels, self.request("GET", "/channels", timeout=timeout))

    def list_machines(self, *, timeout: float | None = None) -> list[Machine]:
        return cast(list[Machine], self.request("GET", "/machines", timeout=timeout)["machines"])

    def report_machine(self, machine: MachineReport, *, timeout: float | None = None) -> Machine:
        return cast(Machine, self.request("POST", "/machines", machine, timeout=timeout)["machine"])

    # ---- Notifications ----

    def send(self, notification: SendRequest, *, idempotency_key: str | None = None, timeout: float | None = None) -> SendResult:
        """``idempotency_key`` is sent as the Idempotency-Key header: a replay returns the first result with duplicate True."""
        headers = {} if idempotency_key is None else {"Idempotency-Key": idempotency_key}
        return cast(SendResult, self.request("POST", "/send", notification, timeout=timeout, headers=headers))

    def get_notification(self, notification_id: str, *, timeout: float | None = None) -> Notification:
        return cast(Notification, self.request("GET", f"/notifications/{_segment(notification_id)}", timeout=timeout))

    def list_notification_recipients(
        self, notification_id: str, *, limit: int | None = None, cursor: str | None = None, status: RecipientStatus | None = None, timeout: float | None = None
    ) -> RecipientPage:
        path = f"/notifications/{_segment(notification_id)}/recipients{_query({'limit': limit, 'cursor': cursor, 'status': status})}"
        return cast(RecipientPage, self.request("GET", path, timeout=timeout))

    # ---- Subscribers ----

    def list_subscribers(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        status: SubscriberStatus | None = None,
        tags: list[str] | None = None,
        external_id: str | None = None,
        timeout: float | None = None,
    ) -> SubscriberPage:
        """``tags``: the subscriber must hold every one."""
        params = {"limit": limit, "cursor": cursor, "status": status, "tags": None if tags is None else ",".join(tags), "externalId": external_id}
        return cast(SubscriberPage, self.request("GET", f"/subscribers{_query(params)}", timeout=timeout))

    def count_subscribers(self, *, timeout: float | None = None) -> SubscriberCounts:
        return cast(SubscriberCounts, self.request("GET", "/subscribers/count", timeout=timeout))

    def get_subscriber(self, subscriber_id: str, *, timeout: float | None = None) -> SubscriberDetail:
        return cast(SubscriberDetail, self.request("GET", f"/subscribers/{_segment(subscriber_id)}", timeout=timeout))

    def update_subscriber(self, subscriber_id: str, update: SubscriberUpdate, *, timeout: float | None = None) -> SubscriberDetail:
        return cast(SubscriberDetail, self.request("PATCH", f"/subscribers/{_segment(subscriber_id)}", update, timeout=timeout))

    def delete_subscriber(self, subscriber_id: str, *, timeout: float | None = None) -> None:
        self.request("DELETE", f"/subscribers/{_segment(subscriber_id)}", timeout=timeout)

    # ---- Campaigns ----

    def list_campaigns(self, *, limit: int | None = None, cursor: str | None = None, timeout: float | None = None) -> CampaignPage:
        return cast(CampaignPage, self.request("GET", f"/campaigns{_query({'limit': limit, 'cursor': cursor})}", timeout=timeout))

    def create_campaign(self, campaign: CreateCampaignRequest, *, timeout: float | None = None) -> Campaign:
        """A draft, or scheduled when ``scheduledAt`` is given; creating never sends (see ``send_campaign``)."""
        return cast(Campaign, self.request("POST", "/campaigns", campaign, timeout=timeout))

    def get_campaign(self, campaign_id: str, *, timeout: float | None = None) -> Campaign:
        return cast(Campaign, self.request("GET", f"/campaigns/{_segment(campaign_id)}", timeout=timeout))

    def update_campaign(self, campaign_id: str, update: CampaignUpdate, *, timeout: float | None = None) -> Campaign:
        return cast(Campaign, self.request("PATCH", f"/campaigns/{_segment(campaign_id)}", update, timeout=timeout))

    def delete_campaign(self, campaign_id: str, *, timeout: float | None = None) -> None:
        self.request("DELETE", f"/campaigns/{_segment(campaign_id)}", timeout=timeout)

    def send_campaign(self, campaign_id: str, *, timeout: float | None = None) -> Campaign:
        return cast(Campaign, self.request("POST", f"/campaigns/{_segment(campaign_id)}/send", timeout=timeout))

    def pause_campaign(self, campaign_id: str, *, timeout: float | None = None) -> Campaign:
        return cast(Campaign, self.request("POST", f"/campaigns/{_segment(campaign_id)}/pause", timeout=timeout))

    def resume_campaign(self, campaign_id: str, *, timeout: float | None = None) -> Campaign:
        return cast(Campaign, self.request("POST", f"/campaigns/{_segment(campaign_id)}/resume", timeout=timeout))

    def get_campaign_stats(self, campaign_id: str, *, timeout: float | None = None) -> CampaignStats:
        return cast(CampaignStats, self.request("GET", f"/campaigns/{_segment(campaign_id)}/stats", timeout=timeout))

    def get_campaign_stats_series(
        self, campaign_id: str, bucket: str, *, from_: str | None = None, to: str | None = None, timeout: float | None = None
    ) -> CampaignStatsSeries:
        """The campaign's sent, delivered, clicked and dismissed counts per minute, hour or day (at most 1,440 buckets)."""
        path = f"/campaigns/{_segment(campaign_id)}/stats/series{_query({'bucket': bucket, 'from': from_, 'to': to})}"
        return cast(CampaignStatsSeries, self.request("GET", path, timeout=timeout))

    # ---- Templates ----

    def list_templates(self, *, limit: int | None = None, cursor: str | None = None, timeout: float | None = None) -> TemplatePage:
        return cast(TemplatePage, self.request("GET", f"/templates{_query({'limit': limit, 'cursor': cursor})}", timeout=timeout))

    def create_template(self, template: CreateTemplateRequest, *, timeout: float | None = None) -> Template:
        return cast(Template, self.request("POST", "/templates", template, timeout=timeout))

    def get_template(self, template_id: str, *, timeout: float | None = None) -> Template:
        return cast(Template, self.request("GET", f"/templates/{_segment(template_id)}", timeout=timeout))

    def update_template(self, template_id: str, update: TemplateUpdate, *, timeout: float | None = None) -> Template:
        return cast(Template, self.request("PATCH", f"/templates/{_segment(template_id)}", update, timeout=timeout))

    def delete_template(self, template_id: str, *, timeout: float | None = None) -> None:
        self.request("DELETE", f"/templates/{_segment(template_id)}", timeout=timeout)

    # ---- Segments ----

    def list_segments(self, *, limit: int | None = None, cursor: str | None = None, timeout: float | None = None) -> SegmentPage:
        return cast(SegmentPage, self.request("GET", f"/segments{_query({'limit': limit, 'cursor': cursor})}", timeout=timeout))

    def create_segment(self, definition: CreateSegmentRequest, *, timeout: float | None = None) -> Segment:
        return cast(Segment, self.request("POST", "/segments", definition, timeout=timeout))

    def get_segment(self, segment_id: str, *, timeout: float | None = None) -> Segment:
        return cast(Segment, self.request("GET", f"/segments/{_segment(segment_id)}", timeout=timeout))

    def update_segment(self, segment_id: str, update: SegmentUpdate, *, timeout: float | None = None) -> Segment:
        """A ``filter`` given replaces the whole filter."""
        return cast(Segment, self.request("PATCH", f"/segments/{_segment(segment_id)}", update, timeout=timeout))

    def delete_segment(self, segment_id: str, *, timeout: float | None = None) -> None:
        self.request("DELETE", f"/segments/{_segment(segment_id)}", timeout=timeout)

    def count_segment(self, segment_id: str, *, timeout: float | None = None) -> SegmentCount:
        """``active``: whom a campaign to the segment reaches now; ``total``: every subscriber it matches."""
        return cast(SegmentCount, self.request("GET", f"/segments/{_segment(segment_id)}/count", timeout=timeout))

    # ---- Flows ----

    def list_flows(self, *, limit: int | None = None, cursor: str | None = None, status: FlowStatus | None = None, timeout: float | None = None) -> FlowPage:
        return cast(FlowPage, self.request("GET", f"/flows{_query({'limit': limit, 'cursor': cursor, 'status': status})}", timeout=timeout))

    def create_flow(self, flow: CreateFlowRequest, *, timeout: float | None = None) -> Flow:
        """A draft: it starts no runs until ``activate_flow``."""
        return cast(Flow, self.request("POST", "/flows", flow, timeout=timeout))

    def get_flow(self, flow_id: str, *, timeout: float | None = None) -> Flow:
        return cast(Flow, self.request("GET", f"/flows/{_segment(flow_id)}", timeout=timeout))

    def update_flow(self, flow_id: str, update: FlowUpdate, *, timeout: float | None = None) -> Flow:
        """``steps`` replaces the whole list; runs in flight keep the steps they started with."""
        return cast(Flow, self.request("PATCH", f"/flows/{_segment(flow_id)}", update, timeout=timeout))

    def delete_flow(self, flow_id: str, *, timeout: float | None = None) -> None:
        self.request("DELETE", f"/flows/{_segment(flow_id)}", timeout=timeout)

    def activate_flow(self, flow_id: str, *, timeout: float | None = None) -> Flow:
        """Needs at least one step (ConflictError otherwise)."""
        return cast(Flow, self.request("POST", f"/flows/{_segment(flow_id)}/activate", timeout=timeout))

    def pause_flow(self, flow_id: str, *, timeout: float | None = None) -> Flow:
        return cast(Flow, self.request("POST", f"/flows/{_segment(flow_id)}/pause", timeout=timeout))

    def list_flow_runs(self, flow_id: str, *, limit: int | None = None, cursor: str | None = None, timeout: float | None = None) -> FlowRunPage:
        return cast(FlowRunPage, self.request("GET", f"/flows/{_segment(flow_id)}/runs{_query({'limit': limit, 'cursor': cursor})}", timeout=timeout))

    # ---- Policy ----

    def authorize(self, action: AuthorizeRequest, *, timeout: float | None = None) -> Verdict:
        return cast(Verdict, self.request("POST", "/authorize", action, timeout=timeout))

    def get_policy(self, *, timeout: float | None = None) -> PolicyDocument:
        return cast(PolicyDocument, self.request("GET", "/policy", timeout=timeout))

    def put_policy(self, policy: str, *, timeout: float | None = None) -> PolicyDocument:
        return cast(PolicyDocument, self.request("PUT", "/policy", {"policy": policy}, timeout=timeout))

    def delete_policy(self, *, timeout: float | None = None) -> PolicyDocument:
        return cast(PolicyDocument, self.request("DELETE", "/policy", timeout=timeout))

    def list_policy_versions(self, *, limit: int | None = None, cursor: str | None = None, timeout: float | None = None) -> PolicyVersionPage:
        """Every write of the policy, newest first (the newest is in force), without their text."""
        return cast(PolicyVersionPage, self.request("GET", f"/policy/versions{_query({'limit': limit, 'cursor': cursor})}", timeout=timeout))

    def get_policy_version(self, version: int, *, timeout: float | None = None) -> PolicyVersionText:
        return cast(PolicyVersionText, self.request("GET", f"/policy/versions/{int(version)}", timeout=timeout))

    def evaluate_policy(self, request: EvaluatePolicyRequest, *, timeout: float | None = None) -> PolicyEvaluation:
        """Tries a call against a draft (``policy``) or the saved policy; nothing is recorded."""
        return cast(PolicyEvaluation, self.request("POST", "/policy/evaluate", request, timeout=timeout))

    # ---- Keys and enrollment (Partner) ----

    def create_key(self, key: CreateKeyRequest, *, timeout: float | None = None) -> CreatedKey:
        return cast(CreatedKey, self.request("POST", "/keys", key, timeout=timeout))

    def list_keys(self, *, external_id: str | None = None, timeout: float | None = None) -> list[BoundKey]:
        return cast(list[BoundKey], self.request("GET", f"/keys{_query({'externalId': external_id})}", timeout=timeout)["keys"])

    def revoke_key(self, key_id: str, *, timeout: float | None = None) -> BoundKey:
        return cast(BoundKey, self.request("DELETE", f"/keys/{_segment(key_id)}", timeout=timeout))

    def enroll(self, *, external_id: str | None = None, timeout: float | None = None) -> Enrollment:
        """A single-use link that connects an end-user's browser; a bound key's own end-user when omitted."""
        body = {} if external_id is None else {"externalId": external_id}
        return cast(Enrollment, self.request("POST", "/enroll", body, timeout=timeout))

    def pair(self, *, external_id: str | None = None, timeout: float | None = None) -> Pairing:
        """A single-use, short-lived link (every plan) that makes the browser opening it an approver
        device of the key owner, or of ``external_id`` (a bound key: its own end-user only)."""
        body = {} if external_id is None else {"externalId": external_id}
        return cast(Pairing, self.request("POST", "/pair", body, timeout=timeout))

    # ---- Ask ----

    def ask(self, question: AskRequest, *, timeout: float | None = None) -> AskRecord:
        return cast(AskRecord, self.request("POST", "/ask", question, timeout=timeout))

    def get_ask(self, correlation_id: str, *, wait: int | None = None, timeout: float | None = None) -> AskRecord:
        """``wait``: seconds (0-55) to hold for an answer."""
        return cast(AskRecord, self.request("GET", f"/ask/{_segment(correlation_id)}{_query({'wait': wait})}", timeout=timeout))

    def list_asks(self, *, status: str | None = None, limit: int | None = None, cursor: str | None = None, timeout: float | None = None) -> AskPage:
        """The workspace's questions, newest first; ``status="pending"`` for those waiting for a person."""
        return cast(AskPage, self.request("GET", f"/ask{_query({'status': status, 'limit': limit, 'cursor': cursor})}", timeout=timeout))

    def answer_ask(self, correlation_id: str, answer: str | bool, *, timeout: float | None = None) -> AskRecord:
        """Records the answer to an open question: confirm "yes"/"no" (or True/False); select: an option; input: 1-2,000 characters."""
        return cast(AskRecord, self.request("POST", f"/ask/{_segment(correlation_id)}", {"answer": answer}, timeout=timeout))

    def withdraw_ask(self, correlation_id: str, *, timeout: float | None = None) -> AskRecord:
        return cast(AskRecord, self.request("DELETE", f"/ask/{_segment(correlation_id)}", timeout=timeout))

    def list_ask_events(self, correlation_id: str, *, limit: int | None = None, cursor: str | None = None, timeout: float | None = None) -> QuestionEventPage:
        """The question's record, oldest first, each entry chained to the one before by its hash."""
        return cast(QuestionEventPage, self.request("GET", f"/ask/{_segment(correlation_id)}/events{_query({'limit': limit, 'cursor': cursor})}", timeout=timeout))

    # ---- Decisions ----

    def create_decision(self, decision: DecisionRequest, *, idempotency_key: str | None = None, timeout: float | None = None) -> Decision:
        headers = {} if idempotency_key is None else {"Idempotency-Key": idempotency_key}
        return cast(Decision, self.request("POST", "/decisions", decision, timeout=timeout, headers=headers))

    def list_decisions(self, *, status: str | None = None, limit: int | None = None, cursor: str | None = None, timeout: float | None = None) -> DecisionPage:
        """The workspace's decisions, newest first (a bound key: its end-user's); ``status="pending"`` is an approver's inbox."""
        return cast(DecisionPage, self.request("GET", f"/decisions{_query({'status': status, 'limit': limit, 'cursor': cursor})}", timeout=timeout))

    def get_decision(self, decision_id: str, *, wait: bool = False, timeout: float | None = None) -> Decision:
        """``wait``: hold until the decision resolves or 55 s pass."""
        return cast(Decision, self.request("GET", f"/decisions/{_segment(decision_id)}{_query({'wait': 'true' if wait else None})}", timeout=timeout))

    def answer_decision(self, decision_id: str, answer: str | bool, *, timeout: float | None = None) -> Decision:
        """confirm: "yes"/"no" (or True/False); select: one of the options; input: 1-2,000 characters."""
        return cast(Decision, self.request("POST", f"/decisions/{_segment(decision_id)}", {"answer": answer}, timeout=timeout))

    def cancel_decision(self, decision_id: str, *, timeout: float | None = None) -> Decision:
        return cast(Decision, self.request("DELETE", f"/decisions/{_segment(decision_id)}", timeout=timeout))

    def list_decision_events(self, decision_id: str, *, limit: int | None = None, cursor: str | None = None, timeout: float | None = None) -> QuestionEventPage:
        """The decision's record, oldest first (opened, delivered, viewed, answered, refused, escalated, cancelled, expired), each entry chained to the one before by its hash."""
        return cast(QuestionEventPage, self.request("GET", f"/decisions/{_segment(decision_id)}/events{_query({'limit': limit, 'cursor': cursor})}", timeout=timeout))

    def get_reachability(self, *, external_id: str | None = None, timeout: float | None = None) -> PersonReachability:
        """The key owner's when ``external_id`` is omitted (a bound key: its own only)."""
        return cast(PersonReachability, self.request("GET", f"/reachability{_query({'externalId': external_id})}", timeout=timeout))

    # ---- Webhook signing secret ----

    def get_webhook_secret(self, *, timeout: float | None = None) -> WebhookSecret:
        return cast(WebhookSecret, self.request("GET", "/webhooks/secret", timeout=timeout))

    def rotate_webhook_secret(self, *, timeout: float | None = None) -> WebhookSecret:
        return cast(WebhookSecret, self.request("POST", "/webhooks/secret/rotate", timeout=timeout))

    # ---- Slack (docs/slack.md) ----

    def connect_slack(self, connection: ConnectSlackRequest, *, timeout: float | None = None) -> SlackConnection:
        """Connects (or replaces) the workspace's Slack app; the token is checked with Slack's auth.test."""
        return cast(SlackConnection, self.request("PUT", "/channels/slack", connection, timeout=timeout))

    def get_slack_connection(self, *, timeout: float | None = None) -> SlackConnection:
        return cast(SlackConnection, self.request("GET", "/channels/slack", timeout=timeout))

    def disconnect_slack(self, *, timeout: float | None = None) -> None:
        self.request("DELETE", "/channels/slack", timeout=timeout)

    # ---- Identity-verification secret (prove external ids with external_id_proof) ----

    def get_identity_secret(self, *, timeout: float | None = None) -> IdentitySecret:
        return cast(IdentitySecret, self.request("GET", "/identity-verification/secret", timeout=timeout))

    def rotate_identity_secret(self, *, timeout: float | None = None) -> IdentitySecret:
        """Proofs made with the previous secret are accepted for 24 h more."""
        return cast(IdentitySecret, self.request("POST", "/identity-verification/secret/rotate", timeout=timeout))

    # ---- Helpers ----

    def ask_and_wait(self, question: AskRequest, *, total_timeout: float, window_seconds: int = MAX_WAIT_SECONDS) -> AskRecord:
        """Asks and waits across server-side windows (each at most 55 s) until the question is
        answered or withdrawn, expires unanswered (``timeout`` with ``expiresInSeconds`` 0: not
        approved), or ``total_timeout`` seconds pass (the record as it stands: still open)."""
        _check_window(window_seconds)
        deadline = time.monotonic() + total_timeout
        first = min(window_seconds, _seconds_left(deadline))
        body: AskRequest = {**question, "wait": True, "timeoutSeconds": first} if first >= 1 else {**question, "wait": False}
        return self._wait_for_ask(self.ask(body, timeout=_HOLD_TIMEOUT), deadline, window_seconds)

    def wait_for_ask(self, record: AskRecord, *, total_timeout: float, window_seconds: int = MAX_WAIT_SECONDS) -> AskRecord:
        """Waits on a question already asked, as ask_and_wait does."""
        _check_window(window_seconds)
        return self._wait_for_ask(record, time.monotonic() + total_timeout, window_seconds)

    def _wait_for_ask(self, record: AskRecord, deadline: float, window_seconds: int) -> AskRecord:
        current = record
        while True:
            if current["status"] in ("answered", "withdrawn") or current["expiresInSeconds"] == 0:
                return current
            wait = min(window_seconds, _seconds_left(deadline), current["expiresInSeconds"])
            if wait < 1:
                return current
            current = self.get_ask(current["correlationId"], wait=wait, timeout=wait + _HOLD_MARGIN_SECONDS)

    def decide_and_wait(self, decision: DecisionRequest, *, total_timeout: float, idempotency_key: str | None = None) -> Decision:
        """Opens a decision and waits, across 55-second server holds, until it is answered,
        cancelled or expired, or ``total_timeout`` seconds pass (then it is returned ``pending``).
        Only ``approved`` means yes."""
        deadline = time.monotonic() + total_timeout
        first = min(MAX_WAIT_SECONDS, _seconds_left(deadline))
        body: DecisionRequest = {**decision, "wait": True, "timeoutSeconds": first} if first >= 1 else {**decision, "wait": False}
        opened = self.create_decision(body, idempotency_key=idempotency_key, timeout=_HOLD_TIMEOUT)
        return self._wait_for_decision(opened, deadline)

    def wait_for_decision(self, decision: Decision, *, total_timeout: float) -> Decision:
        """Waits on a decision already opened, as decide_and_wait does."""
        return self._wait_for_decision(decision, time.monotonic() + total_timeout)

    def _wait_for_decision(self, decision: Decision, deadline: float) -> Decision:
        current = decision
        while current["status"] == "pending":
            left = deadline - time.monotonic()
            if left <= 0:
                return current
            if left >= MAX_WAIT_SECONDS:
                current = self.get_decision(current["decisionId"], wait=True, timeout=_HOLD_TIMEOUT)
                continue
            # The server holds 55 s; a shorter budget ends this request early, then one plain read says where it stands.
            try:
                return self.get_decision(current["decisionId"], wait=True, timeout=left)
            except RequestTimeoutError:
                return self.get_decision(current["decisionId"])
        return current

    def authorize_then_decide(
        self, action: AuthorizeRequest, question: DecisionQuestion, *, total_timeout: float, idempotency_key: str | None = None
    ) -> AuthorizeThenDecideResult:
        """POST /authorize, then: allow -> approved; deny -> refused; requires_human -> a decision
        about the same tool call, waited for within the budget. Only a person's explicit yes
        approves: an unanswered, expired or cancelled decision is a refusal."""
        authorization = self.authorize(action)
        if authorization["verdict"] != "requires_human":
            return {"approved": authorization["verdict"] == "allow", "authorization": authorization, "decision": None}
        # A DecisionQuestion is a DecisionRequest without the tool call, which comes from the action.
        decision = cast(DecisionRequest, {**question, "toolName": action["toolName"]})
        if "externalId" in action and "externalId" not in question:
            decision["externalId"] = action["externalId"]
        if "toolTarget" in action:
            decision["toolTarget"] = action["toolTarget"]
        if "parameters" in action:
            decision["parameters"] = action["parameters"]
        decided = self.decide_and_wait(decision, total_timeout=total_timeout, idempotency_key=idempotency_key)
        return {"approved": decided["approved"], "authorization": authorization, "decision": decided}


def _check_window(window_seconds: int) -> None:
    if not 1 <= window_seconds <= MAX_WAIT_SECONDS:
        raise ValueError(f"window_seconds must be from 1 to {MAX_WAIT_SECONDS}")


def _seconds_left(deadline: float) -> int:
    return math.floor(deadline - time.monotonic())


