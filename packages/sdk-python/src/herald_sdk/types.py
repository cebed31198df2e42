"""Request and response shapes of Herald's server API (the JSON field names, as README.md describes them)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypedDict, Union

Scalar = Union[str, int, float, bool, None]

# ---- Account ----


class Site(TypedDict):
    id: str
    name: str
    slug: str
    domain: str
    subscribePageUrl: str
    siteKey: str
    vapidPublicKey: str
    createdAt: str


class Plan(TypedDict):
    name: str
    active: bool
    apiAccess: bool
    partner: bool
    rateLimitPerMinute: int
    monthlyNotificationAllowance: int


class IdentityKey(TypedDict):
    id: str
    name: str
    origin: Literal["dashboard", "runtime", "connector", "bound"]
    scopes: list[str]
    boundExternalId: str | None
    createdAt: str
    lastUsedAt: str | None
    expiresAt: str | None


class Workspace(TypedDict):
    id: str
    name: str
    approvalMode: Literal["browser", "terminal"]


class Identity(TypedDict):
    key: IdentityKey
    site: Site
    workspace: Workspace
    plan: Plan


class ChannelCounts(TypedDict):
    nativeAppDevices: int
    browserSubscriptions: int


class KeyOwnerChannels(ChannelCounts):
    externalId: str
    reachable: bool


class Channels(TypedDict):
    keyOwner: KeyOwnerChannels
    site: ChannelCounts


class Machine(TypedDict):
    id: str
    name: str
    platform: str
    keyId: str
    firstSeenAt: str
    lastSeenAt: str


class MachineReport(TypedDict, total=False):
    machineId: Required[str]
    name: str
    platform: str


# ---- Notifications ----


class SendRequest(TypedDict, total=False):
    title: Required[str]
    body: Required[str]
    url: str
    iconUrl: str
    imageUrl: str
    subscriberIds: list[str]
    externalIds: list[str]
    tags: list[str]
    idempotencyKey: str


class SendLimits(TypedDict):
    remaining: int
    limit: int


class SendResult(TypedDict):
    success: bool
    status: Literal["queued"]
    campaignId: str
    sent: int
    limits: SendLimits
    duplicate: bool


class DeliveryCounts(TypedDict):
    targeted: int
    queued: int
    delivered: int
    failed: int
    expired: int
    pending: int


class LastDelivery(TypedDict):
    statusCode: int
    outcome: str
    reportedAt: str


class Notification(TypedDict):
    id: str
    status: Literal["queued", "sending", "completed"]
    title: str
    body: str
    url: str | None
    iconUrl: str | None
    imageUrl: str | None
    createdAt: str
    completedAt: str | None
    counts: DeliveryCounts
    lastDelivery: LastDelivery | None


RecipientStatus = Literal["sending", "retrying", "delivered", "failed", "expired"]


class Recipient(TypedDict):
    subscriberId: str
    status: RecipientStatus
    attempts: int
    lastStatusCode: int | None
    updatedAt: str


class RecipientPage(TypedDict):
    data: list[Recipient]
    hasMore: bool
    nextCursor: str | None


# ---- Subscribers ----

SubscriberStatus = Literal["active", "unsubscribed", "expired", "bounced"]


class Subscriber(TypedDict):
    id: str
    siteId: str
    status: SubscriberStatus
    externalId: str | None
    #: The external id was proven (identity verification or pairing): an approver device.
    externalIdVerified: bool
    tags: list[str]
    customData: dict[str, Any]
    browser: str | None
    os: str | None
    country: str | None
    createdAt: str
    updatedAt: str


class SubscriberDelivery(TypedDict):
    pushService: str | None
    reachable: bool
    unsubscribedAt: str | None


class SubscriberDevice(TypedDict):
    browser: str | None
    os: str | None
    language: str | None
    timezone: str | None


class SubscriberDetail(Subscriber):
    delivery: SubscriberDelivery
    device: SubscriberDevice


class SubscriberPage(TypedDict):
    data: list[Subscriber]
    hasMore: bool
    nextCursor: str | None


class SubscriberCounts(TypedDict):
    total: int
    active: int
    unsubscribed: int


class SubscriberUpdate(TypedDict, total=False):
    tags: list[str]
    #: None clears it.
    externalId: str | None
    customData: dict[str, Any]


# ---- Campaigns and templates ----

CampaignStatus = Literal["draft", "scheduled", "sending", "active", "paused", "completed"]


class Campaign(TypedDict):
    id: str
    name: str
    status: CampaignStatus
    title: str
    body: str
    iconUrl: str | None
    imageUrl: str | None
    actionUrl: str | None
    scheduledAt: str | None
    segmentId: str | None
    templateId: str | None
    throttlePerMinute: int | None
    totalTargeted: int
    totalSent: int
    totalDelivered: int
    totalClicked: int
    totalFailed: int
    totalQueued: int
    startError: str | None
    createdAt: str
    updatedAt: str
    startedAt: str | None
    completedAt: str | None


class CampaignPage(TypedDict):
    data: list[Campaign]
    hasMore: bool
    nextCursor: str | None


class CreateCampaignRequest(TypedDict, total=False):
    name: Required[str]
    #: title and body are required without templateId.
    title: str
    body: str
    iconUrl: str | None
    imageUrl: str | None
    actionUrl: str | None
    #: ISO 8601: the campaign is scheduled and starts then by itself.
    scheduledAt: str | None
    templateId: str
    #: Values for the template's {{placeholders}}.
    variables: dict[str, str]
    throttlePerMinute: int | None
    #: A segment of the workspace; None (or absent): every active subscriber.
    segmentId: str | None


class CampaignUpdate(TypedDict, total=False):
    name: str
    title: str
    body: str
    iconUrl: str | None
    imageUrl: str | None
    actionUrl: str | None
    scheduledAt: str | None
    status: Literal["draft", "scheduled", "sending", "active", "paused"]
    throttlePerMinute: int | None
    segmentId: str | None


class CampaignStats(TypedDict):
    totalSent: int
    totalDelivered: int
    totalClicked: int
    totalFailed: int
    #: Percent.
    deliveryRate: float
    clickRate: float


class Template(TypedDict):
    id: str
    name: str
    title: str
    body: str
    iconUrl: str | None
    imageUrl: str | None
    actionUrl: str | None
    createdAt: str
    updatedAt: str


class TemplatePage(TypedDict):
    data: list[Template]
    hasMore: bool
    nextCursor: str | None


class CreateTemplateRequest(TypedDict, total=False):
    name: Required[str]
    title: Required[str]
    body: Required[str]
    iconUrl: str | None
    imageUrl: str | None
    actionUrl: str | None


class TemplateUpdate(TypedDict, total=False):
    name: str
    title: str
    body: str
    iconUrl: str | None
    imageUrl: str | None
    actionUrl: str | None


# ---- Segments ----


class SegmentTags(TypedDict, total=False):
    #: The subscriber holds every one of these ...
    all: list[str]
    #: ... at least one of these ...
    any: list[str]
    #: ... and none of these.
    none: list[str]


class SegmentFilter(TypedDict, total=False):
    """Every dimension given must hold; an empty filter matches every subscriber."""

    tags: SegmentTags
    hasExternalId: bool
    status: list[SubscriberStatus]
    #: Case-insensitive; "Firefox" also matches "Firefox 128".
    browser: list[str]
    os: list[str]
    #: ISO 3166-1 alpha-2 codes, upper case.
    country: list[str]
    #: Top-level keys the subscriber's customData holds with these values.
    customData: dict[str, str | int | float | bool]
    #: ISO 8601: subscribed at or after / before.
    createdAfter: str
    createdBefore: str


class Segment(TypedDict):
    id: str
    name: str
    filter: SegmentFilter
    createdAt: str
    updatedAt: str


class SegmentPage(TypedDict):
    data: list[Segment]
    hasMore: bool
    nextCursor: str | None


class CreateSegmentRequest(TypedDict):
    name: str
    filter: SegmentFilter


class SegmentUpdate(TypedDict, total=False):
    name: str
    #: Replaces the whole filter.
    filter: SegmentFilter


class SegmentCount(TypedDict):
    #: Active subscribers matching: whom a campaign to the segment reaches now.
    active: int
    #: Subscribers matching in any status the filter allows.
    total: int


# ---- Flows ----

FlowStatus = Literal["draft", "active", "paused", "archived"]
TriggerType = Literal["subscription", "unsubscription", "notification_click", "notification_impression", "notification_dismiss"]
RunState = Literal["running", "waiting", "completed", "exited", "cancelled", "failed"]


class StepInput(TypedDict):
    #: send_notification | delay | exit
    stepType: str
    #: send_notification: {"notification": {"title", "body", ...}} or {"templateId", "variables"};
    #: delay: {"delay": {"value", "unit"}} (seconds | minutes | hours | days, at most 365 days); exit: {}.
    config: dict[str, Any]


class FlowStep(TypedDict):
    id: str
    flowId: str
    stepOrder: int
    stepType: str
    config: dict[str, Any]


class Flow(TypedDict):
    id: str
    siteId: str
    name: str
    description: str
    triggerType: TriggerType
    triggerCampaignId: str | None
    status: FlowStatus
    #: Runs started, ever.
    executionCount: int
    steps: list[FlowStep]
    createdAt: str
    updatedAt: str


class FlowPage(TypedDict):
    data: list[Flow]
    hasMore: bool
    nextCursor: str | None


class CreateFlowRequest(TypedDict, total=False):
    name: Required[str]
    triggerType: Required[TriggerType]
    description: str
    #: Notification triggers only: only events about this campaign start runs.
    triggerCampaignId: str | None
    steps: list[StepInput]


class FlowUpdate(TypedDict, total=False):
    name: str
    description: str
    triggerType: TriggerType
    triggerCampaignId: str | None
    status: FlowStatus
    #: Replaces the whole list; runs in flight keep the steps they started with.
    steps: list[StepInput]


class FlowRun(TypedDict):
    id: str
    flowId: str
    subscriberId: str
    triggerType: TriggerType
    triggerEventId: str
    state: RunState
    #: The stepOrder it runs next; None once it ended.
    currentStep: int | None
    nextWakeUpAt: str | None
    endReason: str | None
    notificationIds: list[str]
    createdAt: str
    updatedAt: str
    finishedAt: str | None


class FlowRunPage(TypedDict):
    data: list[FlowRun]
    hasMore: bool
    nextCursor: str | None


# ---- Policy ----


class AuthorizeRequest(TypedDict, total=False):
    toolName: Required[str]
    toolTarget: str
    actor: str
    environment: str
    parameters: dict[str, Scalar]
    externalId: str


VerdictName = Literal["allow", "deny", "requires_human"]


class Verdict(TypedDict):
    verdict: VerdictName
    policy: str | None
    reason: str
    authorizationId: str


class PolicyDocument(TypedDict):
    policy: str | None
    version: int
    updatedAt: str | None


# ---- Keys and enrollment ----


class BoundKey(TypedDict):
    id: str
    name: str
    externalId: str
    createdAt: str
    lastUsedAt: str | None
    expiresAt: str | None
    revoked: bool
    revokedAt: str | None


class CreateKeyRequest(TypedDict, total=False):
    externalId: Required[str]
    name: str
    expiresInSeconds: int


class CreatedKey(TypedDict):
    key: BoundKey
    #: pk_<id>.<secret>: returned once, never again.
    apiKey: str


class Enrollment(TypedDict):
    enrollmentUrl: str
    expiresAt: str
    externalId: str


#: POST /pair answers the same shape: a single-use link and whose approver device it makes.
Pairing = Enrollment


# ---- Questions: /ask and /decisions ----

QuestionType = Literal["confirm", "select", "input"]


class Question(TypedDict, total=False):
    question: Required[str]
    type: QuestionType
    #: Required for select, refused otherwise.
    options: list[str]
    context: str
    placeholder: str
    agentName: str
    callbackUrl: str


class AskRequest(Question, total=False):
    #: Default True: hold the call up to timeoutSeconds (1-55) for the answer.
    wait: bool
    timeoutSeconds: int
    subscriberIds: list[str]
    externalIds: list[str]
    tags: list[str]


class AskRecord(TypedDict):
    correlationId: str
    question: str
    type: QuestionType
    #: timeout with expiresInSeconds > 0: this call's wait ran out, the question is still open.
    status: Literal["pending", "answered", "timeout", "withdrawn"]
    answered: bool
    value: NotRequired[str]
    liveUrl: str
    pollUrl: str
    expiresInSeconds: int
    mode: Literal["browser", "terminal"]
    hint: NotRequired[str]


class DecisionQuestion(Question, total=False):
    """A decision without its tool call and without how the call waits (what authorize_then_decide takes)."""

    externalId: str
    audience: Literal["user", "owner", "team"]
    #: How long it stays answerable: 60-86,400 seconds (default 3,600).
    expiresInSeconds: int
    requireReachable: bool
    idempotencyKey: str


class DecisionRequest(DecisionQuestion, total=False):
    wait: bool
    timeoutSeconds: int
    toolName: str
    toolTarget: str
    parameters: dict[str, Scalar]


class Reachability(TypedDict):
    reachable: bool
    browserSubscriptions: int
    nativeAppDevices: int


class Decision(TypedDict):
    decisionId: str
    status: Literal["pending", "answered", "expired", "cancelled"]
    #: True only for the answer yes to a confirm decision.
    approved: bool
    answer: str | None
    question: str
    type: QuestionType
    options: list[str]
    context: str | None
    placeholder: str | None
    agentName: str | None
    audience: Literal["user", "owner", "team"]
    externalId: str | None
    toolName: str | None
    toolTarget: str | None
    parameters: dict[str, Scalar] | None
    mode: Literal["browser", "terminal"]
    pollUrl: str
    decisionPageUrl: str
    expiresInSeconds: int
    expiresAt: str
    createdAt: str
    answeredAt: str | None
    cancelledAt: str | None
    reachability: Reachability
    idempotencyKey: str | None
    duplicate: bool


class PersonReachability(Reachability):
    externalId: str
    channels: list[Literal["native_app", "browser"]]


class AuthorizeThenDecideResult(TypedDict):
    #: True only for allow, or requires_human and a person's explicit yes. Silence is never approval.
    approved: bool
    authorization: Verdict
    #: The decision opened on requires_human, as it stood when the wait ended; None otherwise.
    decision: Decision | None


# ---- Webhooks ----


class WebhookSecret(TypedDict):
    #: whsec_<base64 of 32 bytes>.
    secret: str
    createdAt: str
    previousSecretExpiresAt: str | None


class IdentitySecret(TypedDict):
    #: idsec_<base64url of 32 bytes>: the HMAC key of external_id_proof.
    secret: str
    createdAt: str
    previousSecretExpiresAt: str | None


class WebhookEvent(TypedDict):
    type: str
    timestamp: str
    data: dict[str, Any]
