import { APIConnectionError, errorFor, RequestTimeoutError, type ErrorBody } from './errors.js';
import type {
  AskQuery,
  AskRecord,
  AskRequest,
  AuthorizeRequest,
  BoundKey,
  Campaign,
  CampaignStats,
  CampaignStatsSeries,
  CampaignStatsSeriesQuery,
  CampaignUpdate,
  Channels,
  CreateCampaignRequest,
  CreateFlowRequest,
  CreatedKey,
  CreateKeyRequest,
  CreateSegmentRequest,
  CreateTemplateRequest,
  Decision,
  DecisionQuery,
  DecisionRequest,
  Enrollment,
  EvaluatePolicyRequest,
  IdentitySecret,
  ConnectSlackRequest,
  SlackConnection,
  Flow,
  FlowQuery,
  FlowRun,
  FlowUpdate,
  Identity,
  Machine,
  MachineReport,
  Notification,
  Page,
  PageQuery,
  PersonReachability,
  PolicyDocument,
  PolicyEvaluation,
  PolicyVersion,
  PolicyVersionText,
  QuestionEvent,
  Recipient,
  Segment,
  SegmentCount,
  SegmentUpdate,
  RecipientQuery,
  SendRequest,
  SendResult,
  Site,
  Subscriber,
  SubscriberCounts,
  SubscriberDetail,
  SubscriberQuery,
  SubscriberUpdate,
  Template,
  TemplateUpdate,
  Verdict,
  Pairing,
  WebhookSecret,
} from './types.js';

export interface HeraldOptions {
  /** A full key, `pk_<id>.<secret>`; default `HERALD_API_KEY`. Keep it in the environment, never in code. */
  apiKey?: string;
  /** Herald's origin, e.g. `https://herald.example.com`; default `HERALD_URL`, else `http://localhost:8080`. Requests go to `<baseUrl>/api/v1/server`. */
  baseUrl?: string;
  /** Default per-request time-out; above the server's longest hold (55 s). Default 75,000. */
  timeoutMs?: number;
  /** Sent with every request, e.g. `X-Herald-Machine-Id`. */
  headers?: Record<string, string>;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
}

export interface RequestOptions {
  /** This request's time-out (RequestTimeoutError when it passes). */
  timeoutMs?: number;
  /** Aborts the request; the signal's reason is thrown as is. */
  signal?: AbortSignal;
}

export interface IdempotentOptions extends RequestOptions {
  /** Sent as the `Idempotency-Key` header (at most 200 characters): a replay returns the first result with `duplicate: true`. */
  idempotencyKey?: string;
}

export interface WaitOptions {
  /** The caller's whole budget for the wait, across every window. */
  totalTimeoutMs: number;
  /** Seconds each server-side wait lasts, 1–55 (asks only; a decision's wait is the server's 55 s). Default 55. */
  windowSeconds?: number;
  signal?: AbortSignal;
}

export interface AuthorizeThenDecideResult {
  /** True only for `allow`, or `requires_human` and a person's explicit yes. Silence is never approval. */
  approved: boolean;
  authorization: Verdict;
  /** The decision opened on `requires_human`, as it stood when the wait ended; null otherwise. */
  decision: Decision | null;
}

const SERVER_API = '/api/v1/server';
const MAX_WAIT_SECONDS = 55;
/** A held request's own time-out: the hold plus room for the network, whatever the client's default. */
const HOLD_MARGIN_SECONDS = 15;
const HOLD_TIMEOUT_MS = (MAX_WAIT_SECONDS + HOLD_MARGIN_SECONDS) * 1_000;

/** Seconds from a `Retry-After` header: a number of seconds or an HTTP date. */
function retryAfterOf(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return seconds;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - Date.now()) / 1_000));
}

function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined) search.set(name, String(value));
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}

const segment = (id: string): string => encodeURIComponent(id);

/**
 * A client for `/api/v1/server`. Each method is one HTTP request and never retries on its own:
 * a 429 or 5xx is thrown as RateLimitError or ServerError for the caller to decide.
 */
export class Herald {
  readonly #apiKey: string;
  readonly #baseUrl: string;
  readonly #timeoutMs: number;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;

  constructor(options: HeraldOptions = {}) {
    const apiKey = options.apiKey ?? process.env.HERALD_API_KEY;
    if (!apiKey) throw new TypeError('No API key: pass apiKey or set HERALD_API_KEY');
    this.#apiKey = apiKey;
    this.#baseUrl = (options.baseUrl ?? process.env.HERALD_URL ?? 'http://localhost:8080').replace(/\/+$/, '');
    this.#timeoutMs = options.timeoutMs ?? 75_000;
    this.#headers = options.headers ?? {};
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** One request; the parsed JSON body (undefined for 204), or a typed error. */
  async request<T>(method: string, path: string, body?: unknown, options: RequestOptions & { headers?: Record<string, string> } = {}): Promise<T> {
    const timeout = AbortSignal.timeout(options.timeoutMs ?? this.#timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const headers: Record<string, string> = { ...this.#headers, ...options.headers, authorization: `Bearer ${this.#apiKey}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    let text: string;
    try {
      response = await this.#fetch(`${this.#baseUrl}${SERVER_API}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal, redirect: 'manual' });
      text = await response.text();
    } catch (err) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (timeout.aborted) throw new RequestTimeoutError(0, { code: 'timeout', error: `No answer within ${options.timeoutMs ?? this.#timeoutMs} ms` });
      throw new APIConnectionError(0, { code: 'connection_error', error: err instanceof Error ? err.message : String(err) });
    }
    if (response.ok) return (text === '' ? undefined : JSON.parse(text)) as T;
    let parsed: ErrorBody;
    try {
      parsed = JSON.parse(text) as ErrorBody;
    } catch {
      parsed = { error: text };
    }
    throw errorFor(response.status, parsed, retryAfterOf(response.headers.get('retry-after')));
  }

  // ---- Account ----

  getIdentity(options?: RequestOptions): Promise<Identity> {
    return this.request('GET', '/identity', undefined, options);
  }

  getSite(options?: RequestOptions): Promise<Site> {
    return this.request('GET', '/site', undefined, options);
  }

  getChannels(options?: RequestOptions): Promise<Channels> {
    return this.request('GET', '/channels', undefined, options);
  }

  async listMachines(options?: RequestOptions): Promise<Machine[]> {
    return (await this.request<{ machines: Machine[] }>('GET', '/machines', undefined, options)).machines;
  }

  async reportMachine(machine: MachineReport, options?: RequestOptions): Promise<Machine> {
    return (await this.request<{ machine: Machine }>('POST', '/machines', machine, options)).machine;
  }

  // ---- Notifications ----

  send(notification: SendRequest, { idempotencyKey, ...options }: IdempotentOptions = {}): Promise<SendResult> {
    return this.request('POST', '/send', notification, { ...options, headers: idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey } });
  }

  getNotification(notificationId: string, options?: RequestOptions): Promise<Notification> {
    return this.request('GET', `/notifications/${segment(notificationId)}`, undefined, options);
  }

  listNotificationRecipients(notificationId: string, params: RecipientQuery = {}, options?: RequestOptions): Promise<Page<Recipient>> {
    return this.request('GET', `/notifications/${segment(notificationId)}/recipients${query({ ...params })}`, undefined, options);
  }

  // ---- Subscribers ----

  listSubscribers({ tags, ...params }: SubscriberQuery = {}, options?: RequestOptions): Promise<Page<Subscriber>> {
    return this.request('GET', `/subscribers${query({ ...params, tags: tags?.join(',') })}`, undefined, options);
  }

  countSubscribers(options?: RequestOptions): Promise<SubscriberCounts> {
    return this.request('GET', '/subscribers/count', undefined, options);
  }

  getSubscriber(subscriberId: string, options?: RequestOptions): Promise<SubscriberDetail> {
    return this.request('GET', `/subscribers/${segment(subscriberId)}`, undefined, options);
  }

  updateSubscriber(subscriberId: string, update: SubscriberUpdate, options?: RequestOptions): Promise<SubscriberDetail> {
    return this.request('PATCH', `/subscribers/${segment(subscriberId)}`, update, options);
  }

  async deleteSubscriber(subscriberId: string, options?: RequestOptions): Promise<void> {
    await this.request<undefined>('DELETE', `/subscribers/${segment(subscriberId)}`, undefined, options);
  }

  // ---- Campaigns ----

  listCampaigns(params: PageQuery = {}, options?: RequestOptions): Promise<Page<Campaign>> {
    return this.request('GET', `/campaigns${query({ ...params })}`, undefined, options);
  }

  /** A draft, or scheduled when `scheduledAt` is given; creating never sends (see `sendCampaign`). */
  createCampaign(campaign: CreateCampaignRequest, options?: RequestOptions): Promise<Campaign> {
    return this.request('POST', '/campaigns', campaign, options);
  }

  getCampaign(campaignId: string, options?: RequestOptions): Promise<Campaign> {
    return this.request('GET', `/campaigns/${segment(campaignId)}`, undefined, options);
  }

  updateCampaign(campaignId: string, update: CampaignUpdate, options?: RequestOptions): Promise<Campaign> {
    return this.request('PATCH', `/campaigns/${segment(campaignId)}`, update, options);
  }

  async deleteCampaign(campaignId: string, options?: RequestOptions): Promise<void> {
    await this.request<undefined>('DELETE', `/campaigns/${segment(campaignId)}`, undefined, options);
  }

  sendCampaign(campaignId: string, options?: RequestOptions): Promise<Campaign> {
    return this.request('POST', `/campaigns/${segment(campaignId)}/send`, undefined, options);
  }

  pauseCampaign(campaignId: string, options?: RequestOptions): Promise<Campaign> {
    return this.request('POST', `/campaigns/${segment(campaignId)}/pause`, undefined, options);
  }

  resumeCampaign(campaignId: string, options?: RequestOptions): Promise<Campaign> {
    return this.request('POST', `/campaigns/${segment(campaignId)}/resume`, undefined, options);
  }

  getCampaignStats(campaignId: string, options?: RequestOptions): Promise<CampaignStats> {
    return this.request('GET', `/campaigns/${segment(campaignId)}/stats`, undefined, options);
  }

  /** The campaign's sent, delivered, clicked and dismissed counts per minute, hour or day (at most 1,440 buckets). */
  getCampaignStatsSeries(campaignId: string, params: CampaignStatsSeriesQuery, options?: RequestOptions): Promise<CampaignStatsSeries> {
    return this.request('GET', `/campaigns/${segment(campaignId)}/stats/series${query({ ...params })}`, undefined, options);
  }

  // ---- Templates ----

  listTemplates(params: PageQuery = {}, options?: RequestOptions): Promise<Page<Template>> {
    return this.request('GET', `/templates${query({ ...params })}`, undefined, options);
  }

  createTemplate(template: CreateTemplateRequest, options?: RequestOptions): Promise<Template> {
    return this.request('POST', '/templates', template, options);
  }

  getTemplate(templateId: string, options?: RequestOptions): Promise<Template> {
    return this.request('GET', `/templates/${segment(templateId)}`, undefined, options);
  }

  updateTemplate(templateId: string, update: TemplateUpdate, options?: RequestOptions): Promise<Template> {
    return this.request('PATCH', `/templates/${segment(templateId)}`, update, options);
  }

  async deleteTemplate(templateId: string, options?: RequestOptions): Promise<void> {
    await this.request<undefined>('DELETE', `/templates/${segment(templateId)}`, undefined, options);
  }

  // ---- Segments ----

  listSegments(params: PageQuery = {}, options?: RequestOptions): Promise<Page<Segment>> {
    return this.request('GET', `/segments${query({ ...params })}`, undefined, options);
  }

  createSegment(definition: CreateSegmentRequest, options?: RequestOptions): Promise<Segment> {
    return this.request('POST', '/segments', definition, options);
  }

  getSegment(segmentId: string, options?: RequestOptions): Promise<Segment> {
    return this.request('GET', `/segments/${segment(segmentId)}`, undefined, options);
  }

  /** A `filter` given replaces the whole filter. */
  updateSegment(segmentId: string, update: SegmentUpdate, options?: RequestOptions): Promise<Segment> {
    return this.request('PATCH', `/segments/${segment(segmentId)}`, update, options);
  }

  async deleteSegment(segmentId: string, options?: RequestOptions): Promise<void> {
    await this.request<undefined>('DELETE', `/segments/${segment(segmentId)}`, undefined, options);
  }

  /** `active`: whom a campaign to the segment reaches now; `total`: every subscriber it matches. */
  countSegment(segmentId: string, options?: RequestOptions): Promise<SegmentCount> {
    return this.request('GET', `/segments/${segment(segmentId)}/count`, undefined, options);
  }

  // ---- Flows ----

  listFlows(params: FlowQuery = {}, options?: RequestOptions): Promise<Page<Flow>> {
    return this.request('GET', `/flows${query({ ...params })}`, undefined, options);
  }

  /** A draft: it starts no runs until `activateFlow`. */
  createFlow(flow: CreateFlowRequest, options?: RequestOptions): Promise<Flow> {
    return this.request('POST', '/flows', flow, options);
  }

  getFlow(flowId: string, options?: RequestOptions): Promise<Flow> {
    return this.request('GET', `/flows/${segment(flowId)}`, undefined, options);
  }

  /** `steps` replaces the whole list; runs in flight keep the steps they started with. */
  updateFlow(flowId: string, update: FlowUpdate, options?: RequestOptions): Promise<Flow> {
    return this.request('PATCH', `/flows/${segment(flowId)}`, update, options);
  }

  async deleteFlow(flowId: string, options?: RequestOptions): Promise<void> {
    await this.request<undefined>('DELETE', `/flows/${segment(flowId)}`, undefined, options);
  }

  /** Needs at least one step (ConflictError otherwise). */
  activateFlow(flowId: string, options?: RequestOptions): Promise<Flow> {
    return this.request('POST', `/flows/${segment(flowId)}/activate`, undefined, options);
  }

  pauseFlow(flowId: string, options?: RequestOptions): Promise<Flow> {
    return this.request('POST', `/flows/${segment(flowId)}/pause`, undefined, options);
  }

  listFlowRuns(flowId: string, params: PageQuery = {}, options?: RequestOptions): Promise<Page<FlowRun>> {
    return this.request('GET', `/flows/${segment(flowId)}/runs${query({ ...params })}`, undefined, options);
  }

  // ---- Policy ----

  authorize(action: AuthorizeRequest, options?: RequestOptions): Promise<Verdict> {
    return this.request('POST', '/authorize', action, options);
  }

  getPolicy(options?: RequestOptions): Promise<PolicyDocument> {
    return this.request('GET', '/policy', undefined, options);
  }

  putPolicy(policy: string, options?: RequestOptions): Promise<PolicyDocument> {
    return this.request('PUT', '/policy', { policy }, options);
  }

  deletePolicy(options?: RequestOptions): Promise<PolicyDocument> {
    return this.request('DELETE', '/policy', undefined, options);
  }

  /** Every write of the policy, newest first (the newest is in force). */
  listPolicyVersions(params: PageQuery = {}, options?: RequestOptions): Promise<Page<PolicyVersion>> {
    return this.request('GET', `/policy/versions${query({ ...params })}`, undefined, options);
  }

  getPolicyVersion(version: number, options?: RequestOptions): Promise<PolicyVersionText> {
    return this.request('GET', `/policy/versions/${segment(String(version))}`, undefined, options);
  }

  /** Tries a call against a draft (`policy`) or the saved policy; nothing is recorded. */
  evaluatePolicy(request: EvaluatePolicyRequest, options?: RequestOptions): Promise<PolicyEvaluation> {
    return this.request('POST', '/policy/evaluate', request, options);
  }

  // ---- Keys and enrollment (Partner) ----

  createKey(key: CreateKeyRequest, options?: RequestOptions): Promise<CreatedKey> {
    return this.request('POST', '/keys', key, options);
  }

  async listKeys(params: { externalId?: string } = {}, options?: RequestOptions): Promise<BoundKey[]> {
    return (await this.request<{ keys: BoundKey[] }>('GET', `/keys${query(params)}`, undefined, options)).keys;
  }

  revokeKey(keyId: string, options?: RequestOptions): Promise<BoundKey> {
    return this.request('DELETE', `/keys/${segment(keyId)}`, undefined, options);
  }

  /** A single-use link that connects an end-user's browser; a bound key's own end-user when `externalId` is omitted. */
  enroll(params: { externalId?: string } = {}, options?: RequestOptions): Promise<Enrollment> {
    return this.request('POST', '/enroll', params, options);
  }

  /**
   * A single-use, short-lived link (every plan) that makes the browser opening it an approver
   * device of the key owner, or of `externalId` (a bound key: its own end-user only).
   */
  pair(params: { externalId?: string } = {}, options?: RequestOptions): Promise<Pairing> {
    return this.request('POST', '/pair', params, options);
  }

  // ---- Ask ----

  ask(question: AskRequest, options?: RequestOptions): Promise<AskRecord> {
    return this.request('POST', '/ask', question, options);
  }

  /** `wait`: seconds (0–55) to hold for an answer. */
  getAsk(correlationId: string, params: { wait?: number } = {}, options?: RequestOptions): Promise<AskRecord> {
    return this.request('GET', `/ask/${segment(correlationId)}${query(params)}`, undefined, options);
  }

  /** The workspace's questions, newest first; `status: 'pending'` for those waiting for a person. */
  listAsks(params: AskQuery = {}, options?: RequestOptions): Promise<Page<AskRecord>> {
    return this.request('GET', `/ask${query({ ...params })}`, undefined, options);
  }

  /** Records the answer to an open question (as an approver would): confirm `"yes"`/`"no"` (or true/false); select: one of the options; input: 1–2,000 characters. */
  answerAsk(correlationId: string, answer: string | boolean, options?: RequestOptions): Promise<AskRecord> {
    return this.request('POST', `/ask/${segment(correlationId)}`, { answer }, options);
  }

  withdrawAsk(correlationId: string, options?: RequestOptions): Promise<AskRecord> {
    return this.request('DELETE', `/ask/${segment(correlationId)}`, undefined, options);
  }

  /** The question's record, oldest first, each entry chained to the one before by its hash. */
  listAskEvents(correlationId: string, params: PageQuery = {}, options?: RequestOptions): Promise<Page<QuestionEvent>> {
    return this.request('GET', `/ask/${segment(correlationId)}/events${query({ ...params })}`, undefined, options);
  }

  // ---- Decisions ----

  createDecision(decision: DecisionRequest, { idempotencyKey, ...options }: IdempotentOptions = {}): Promise<Decision> {
    return this.request('POST', '/decisions', decision, { ...options, headers: idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey } });
  }

  /** The workspace's decisions, newest first (a bound key: its end-user's); `status: 'pending'` is an approver's inbox. */
  listDecisions(params: DecisionQuery = {}, options?: RequestOptions): Promise<Page<Decision>> {
    return this.request('GET', `/decisions${query({ ...params })}`, undefined, options);
  }

  /** `wait: true` holds until the decision resolves or 55 s pass. */
  getDecision(decisionId: string, params: { wait?: boolean } = {}, options?: RequestOptions): Promise<Decision> {
    return this.request('GET', `/decisions/${segment(decisionId)}${query({ wait: params.wait ? 'true' : undefined })}`, undefined, options);
  }

  /** A confirm answer is `"yes"`/`"no"` (or true/false); select: one of the options; input: 1–2,000 characters. */
  answerDecision(decisionId: string, answer: string | boolean, options?: RequestOptions): Promise<Decision> {
    return this.request('POST', `/decisions/${segment(decisionId)}`, { answer }, options);
  }

  cancelDecision(decisionId: string, options?: RequestOptions): Promise<Decision> {
    return this.request('DELETE', `/decisions/${segment(decisionId)}`, undefined, options);
  }

  /** The decision's record, oldest first (opened, delivered, viewed, answered, refused, escalated, cancelled, expired), each entry chained to the one before by its hash. */
  listDecisionEvents(decisionId: string, params: PageQuery = {}, options?: RequestOptions): Promise<Page<QuestionEvent>> {
    return this.request('GET', `/decisions/${segment(decisionId)}/events${query({ ...params })}`, undefined, options);
  }

  /** The key owner's when `externalId` is omitted (a bound key: its own only). */
  getReachability(params: { externalId?: string } = {}, options?: RequestOptions): Promise<PersonReachability> {
    return this.request('GET', `/reachability${query(params)}`, undefined, options);
  }

  // ---- Webhook signing secret ----

  getWebhookSecret(options?: RequestOptions): Promise<WebhookSecret> {
    return this.request('GET', '/webhooks/secret', undefined, options);
  }

  rotateWebhookSecret(options?: RequestOptions): Promise<WebhookSecret> {
    return this.request('POST', '/webhooks/secret/rotate', undefined, options);
  }

  // ---- Slack (docs/slack.md) ----

  /** Connects (or replaces) the workspace's Slack app; the token is checked with Slack's auth.test. */
  connectSlack(connection: ConnectSlackRequest, options?: RequestOptions): Promise<SlackConnection> {
    return this.request('PUT', '/channels/slack', connection, options);
  }

  getSlackConnection(options?: RequestOptions): Promise<SlackConnection> {
    return this.request('GET', '/channels/slack', undefined, options);
  }

  async disconnectSlack(options?: RequestOptions): Promise<void> {
    await this.request<undefined>('DELETE', '/channels/slack', undefined, options);
  }

  // ---- Identity-verification secret (prove external ids with externalIdProof) ----

  getIdentitySecret(options?: RequestOptions): Promise<IdentitySecret> {
    return this.request('GET', '/identity-verification/secret', undefined, options);
  }

  /** Proofs made with the previous secret are accepted for 24 h more. */
  rotateIdentitySecret(options?: RequestOptions): Promise<IdentitySecret> {
    return this.request('POST', '/identity-verification/secret/rotate', undefined, options);
  }

  // ---- Helpers ----

  /**
   * Asks and waits across server-side windows (each at most 55 s) until the question is answered
   * or withdrawn, expires unanswered (`timeout` with `expiresInSeconds` 0: not approved), or the
   * budget ends (the record as it stands: still open, `pending` or `timeout`).
   */
  async askAndWait(question: Omit<AskRequest, 'wait' | 'timeoutSeconds'>, options: WaitOptions): Promise<AskRecord> {
    const deadline = Date.now() + options.totalTimeoutMs;
    const window = windowOf(options);
    const first = Math.min(window, secondsLeft(deadline));
    const record = await this.ask(first >= 1 ? { ...question, wait: true, timeoutSeconds: first } : { ...question, wait: false }, { signal: options.signal, timeoutMs: HOLD_TIMEOUT_MS });
    return this.#waitForAsk(record, deadline, window, options.signal);
  }

  /** Waits on a question already asked, as askAndWait does. */
  waitForAsk(record: AskRecord, options: WaitOptions): Promise<AskRecord> {
    return this.#waitForAsk(record, Date.now() + options.totalTimeoutMs, windowOf(options), options.signal);
  }

  async #waitForAsk(record: AskRecord, deadline: number, window: number, signal: AbortSignal | undefined): Promise<AskRecord> {
    let current = record;
    for (;;) {
      if (current.status === 'answered' || current.status === 'withdrawn' || current.expiresInSeconds === 0) return current;
      const wait = Math.min(window, secondsLeft(deadline), current.expiresInSeconds);
      if (wait < 1) return current;
      current = await this.getAsk(current.correlationId, { wait }, { signal, timeoutMs: (wait + HOLD_MARGIN_SECONDS) * 1_000 });
    }
  }

  /**
   * Opens a decision and waits, across 55-second server holds, until it is answered, cancelled or
   * expired, or the budget ends (then the decision as it stands, `pending`). Only `approved` means yes.
   */
  async decideAndWait(decision: Omit<DecisionRequest, 'wait' | 'timeoutSeconds'>, options: WaitOptions & { idempotencyKey?: string }): Promise<Decision> {
    const deadline = Date.now() + options.totalTimeoutMs;
    const first = Math.min(MAX_WAIT_SECONDS, secondsLeft(deadline));
    const opened = await this.createDecision(first >= 1 ? { ...decision, wait: true, timeoutSeconds: first } : { ...decision, wait: false }, {
      idempotencyKey: options.idempotencyKey,
      signal: options.signal,
      timeoutMs: HOLD_TIMEOUT_MS,
    });
    return this.#waitForDecision(opened, deadline, options.signal);
  }

  /** Waits on a decision already opened, as decideAndWait does. */
  waitForDecision(decision: Decision, options: Omit<WaitOptions, 'windowSeconds'>): Promise<Decision> {
    return this.#waitForDecision(decision, Date.now() + options.totalTimeoutMs, options.signal);
  }

  async #waitForDecision(decision: Decision, deadline: number, signal: AbortSignal | undefined): Promise<Decision> {
    let current = decision;
    while (current.status === 'pending') {
      const left = deadline - Date.now();
      if (left <= 0) return current;
      if (left >= MAX_WAIT_SECONDS * 1_000) {
        current = await this.getDecision(current.decisionId, { wait: true }, { signal, timeoutMs: HOLD_TIMEOUT_MS });
        continue;
      }
      // The server holds 55 s; a shorter budget ends this request early, then one plain read says where it stands.
      const budget = new AbortController();
      const timer = setTimeout(() => budget.abort(), left);
      try {
        return await this.getDecision(current.decisionId, { wait: true }, { signal: signal ? AbortSignal.any([signal, budget.signal]) : budget.signal, timeoutMs: HOLD_TIMEOUT_MS });
      } catch (err) {
        if (!budget.signal.aborted || signal?.aborted) throw err;
        return this.getDecision(current.decisionId, {}, { signal });
      } finally {
        clearTimeout(timer);
      }
    }
    return current;
  }

  /**
   * POST /authorize, then: allow → approved; deny → refused; requires_human → a decision about the
   * same tool call, waited for within the budget. Only a person's explicit yes approves: an
   * unanswered, expired or cancelled decision is a refusal.
   */
  async authorizeThenDecide(
    action: AuthorizeRequest,
    question: Omit<DecisionRequest, 'wait' | 'timeoutSeconds' | 'toolName' | 'toolTarget' | 'parameters'>,
    options: WaitOptions & { idempotencyKey?: string },
  ): Promise<AuthorizeThenDecideResult> {
    const authorization = await this.authorize(action, { signal: options.signal });
    if (authorization.verdict !== 'requires_human') return { approved: authorization.verdict === 'allow', authorization, decision: null };
    const decision = await this.decideAndWait(
      {
        ...(action.externalId === undefined ? {} : { externalId: action.externalId }),
        ...question,
        toolName: action.toolName,
        ...(action.toolTarget === undefined ? {} : { toolTarget: action.toolTarget }),
        ...(action.parameters === undefined ? {} : { parameters: action.parameters }),
      },
      options,
    );
    return { approved: decision.approved, authorization, decision };
  }
}

const secondsLeft = (deadline: number): number => Math.floor((deadline - Date.now()) / 1_000);

function windowOf(options: WaitOptions): number {
  const window = options.windowSeconds ?? MAX_WAIT_SECONDS;
  if (!Number.isInteger(window) || window < 1 || window > MAX_WAIT_SECONDS) throw new RangeError(`windowSeconds must be an integer from 1 to ${MAX_WAIT_SECONDS}`);
  return window;
}
