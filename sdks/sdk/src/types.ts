/**
 * Request and response shapes of Herald's server API. Not written here: each is taken from
 * api.gen.ts, which `npm run generate` produces from the OpenAPI document the gateway builds out
 * of its route schemas, so the SDK cannot drift from what the server validates and returns.
 */
import type { operations } from './api.gen.js';

type Operation = keyof operations;
type JsonOf<Part> = Part extends { content: { 'application/json': infer Body } } ? Body : never;
/** The body of an operation's success answer (200, or 201 for the creating ones). */
type Success<Name extends Operation> = operations[Name]['responses'] extends { 200: infer Ok } ? JsonOf<Ok> : operations[Name]['responses'] extends { 201: infer Created } ? JsonOf<Created> : never;
type RequestBody<Name extends Operation> = JsonOf<NonNullable<operations[Name]['requestBody']>>;
/** Query parameters; every one is optional to send (the server fills in defaults such as `limit`). */
type QueryOf<Name extends Operation> = Partial<NonNullable<operations[Name]['parameters']['query']>>;
/** An element of the list under `field` of a success body. */
type Item<Name extends Operation, Field extends string> = Success<Name> extends Record<Field, Array<infer Element>> ? Element : never;

// ---- Account ----

export type Site = Success<'getSite'>;
export type Workspace = Success<'getWorkspace'>;
export type UpdateWorkspaceRequest = RequestBody<'updateWorkspace'>;
export type Identity = Success<'getIdentity'>;
export type Plan = Identity['plan'];
export type Channels = Success<'getChannels'>;
export type ChannelCounts = Channels['site'];
export type Machine = Item<'listMachines', 'machines'>;
export type MachineReport = RequestBody<'reportMachine'>;

// ---- Notifications ----

export type SendRequest = RequestBody<'sendNotification'>;
export type Targeting = Pick<SendRequest, 'subscriberIds' | 'externalIds' | 'tags'>;
export type SendResult = Success<'sendNotification'>;
export type Notification = Success<'getNotification'>;
export type Recipient = Item<'listNotificationRecipients', 'data'>;
export type RecipientStatus = Recipient['status'];
export type RecipientQuery = QueryOf<'listNotificationRecipients'>;

/** One page of a list: `nextCursor` fetches the next while `hasMore`. */
export interface Page<T> {
  data: T[];
  hasMore: boolean;
  nextCursor: string | null;
}

// ---- Subscribers ----

export type Subscriber = Item<'listSubscribers', 'data'>;
export type SubscriberStatus = Subscriber['status'];
export type SubscriberDetail = Success<'getSubscriber'>;
/** The list's filters; `tags` is a list here and sent comma-separated. */
export type SubscriberQuery = Omit<QueryOf<'listSubscribers'>, 'tags'> & { tags?: string[] };
export type SubscriberCounts = Success<'countSubscribers'>;
export type SubscriberUpdate = RequestBody<'updateSubscriber'>;

// ---- Campaigns and templates ----

export type Campaign = Success<'getCampaign'>;
export type CampaignStatus = Campaign['status'];
export type CreateCampaignRequest = RequestBody<'createCampaign'>;
export type CampaignUpdate = RequestBody<'updateCampaign'>;
export type CampaignStats = Success<'getCampaignStats'>;
export type CampaignStatsSeries = Success<'getCampaignStatsSeries'>;
export type CampaignStatsSeriesQuery = QueryOf<'getCampaignStatsSeries'>;
export type PageQuery = QueryOf<'listCampaigns'>;
export type Template = Success<'getTemplate'>;
export type CreateTemplateRequest = RequestBody<'createTemplate'>;
export type TemplateUpdate = RequestBody<'updateTemplate'>;

// ---- Segments ----

export type Segment = Success<'getSegment'>;
export type SegmentFilter = Segment['filter'];
export type CreateSegmentRequest = RequestBody<'createSegment'>;
export type SegmentUpdate = RequestBody<'updateSegment'>;
export type SegmentCount = Success<'countSegment'>;

// ---- Flows ----

export type Flow = Success<'getFlow'>;
export type FlowStatus = Flow['status'];
export type FlowStep = Flow['steps'][number];
export type FlowQuery = QueryOf<'listFlows'>;
export type CreateFlowRequest = RequestBody<'createFlow'>;
export type FlowUpdate = RequestBody<'updateFlow'>;
export type FlowRun = Item<'listFlowRuns', 'data'>;

// ---- Policy ----

export type AuthorizeRequest = RequestBody<'authorize'>;
export type Scalar = NonNullable<AuthorizeRequest['parameters']>[string];
export type Verdict = Success<'authorize'>;
export type VerdictName = Verdict['verdict'];
export type PolicyDocument = Success<'getPolicy'>;
/** One write of the policy, as listed (without its text). */
export type PolicyVersion = Item<'listPolicyVersions', 'data'>;
export type PolicyChanger = NonNullable<PolicyVersion['changedBy']>;
/** One version with its text (null for a DELETE). */
export type PolicyVersionText = Success<'getPolicyVersion'>;
/** POST /policy/evaluate: a sample call, and `policy` a draft to evaluate instead of the saved policy. */
export type EvaluatePolicyRequest = RequestBody<'evaluatePolicy'>;
export type PolicyEvaluation = Success<'evaluatePolicy'>;

// ---- Keys and enrollment ----

export type BoundKey = Item<'listKeys', 'keys'>;
export type CreateKeyRequest = RequestBody<'createKey'>;
export type CreatedKey = Success<'createKey'>;
export type Enrollment = Success<'createEnrollment'>;
export type Pairing = Success<'createPairing'>;

// ---- Members and sessions (the console's calls; a key cannot make them) ----

export type Me = Success<'getMe'>;
export type Member = Item<'listMembers', 'data'>;
export type Role = Member['role'];
export type InviteMemberRequest = RequestBody<'inviteMember'>;
export type SignInLinkRequest = RequestBody<'requestSignInLink'>;
export type MyDevice = Item<'listMyDevices', 'devices'>;
export type AddMyDeviceRequest = RequestBody<'addMyDevice'>;
export type AddedDevice = Success<'addMyDevice'>;

// ---- Questions: /ask and /decisions ----

export type AskRequest = RequestBody<'ask'>;
export type AskRecord = Success<'getAsk'>;
export type AskQuery = QueryOf<'listAsks'>;
export type QuestionType = AskRecord['type'];
export type DecisionRequest = RequestBody<'createDecision'>;
export type Decision = Success<'getDecision'>;
export type DecisionQuery = QueryOf<'listDecisions'>;
export type Reachability = Decision['reachability'];
/** An entry of a question's record (GET /decisions/{id}/events, GET /ask/{id}/events). */
export type QuestionEvent = Item<'listDecisionEvents', 'data'>;
export type PersonReachability = Success<'getReachability'>;
/** Who may answer a question (`approvers` of ask and createDecision). */
export type Approver = NonNullable<DecisionRequest['approvers']>[number];
/** One step of a question's `escalation`. */
export type EscalationStep = NonNullable<DecisionRequest['escalation']>[number];
/** Who answered a question: `answeredBy` of its record once answered. */
export type AnsweredBy = NonNullable<Decision['answeredBy']>;

// ---- Webhooks ----

export type WebhookSecret = Success<'getWebhookSecret'>;
export type IdentitySecret = Success<'getIdentitySecret'>;

// ---- Slack ----

export type SlackConnection = Success<'getSlackConnection'>;
export type ConnectSlackRequest = RequestBody<'connectSlack'>;

/** What a webhook's body holds (Standard Webhooks): not a route of the API, so written here. */
export interface WebhookEvent<T = Record<string, unknown>> {
  type: string;
  timestamp: string;
  data: T;
}
