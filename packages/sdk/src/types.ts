/** Request and response shapes of Herald's server API, as README.md describes them. */

export type Scalar = string | number | boolean | null;

// ---- Account ----

export interface Site {
  id: string;
  name: string;
  slug: string;
  domain: string;
  subscribePageUrl: string;
  siteKey: string;
  vapidPublicKey: string;
  createdAt: string;
}

export interface Plan {
  name: string;
  active: boolean;
  apiAccess: boolean;
  partner: boolean;
  rateLimitPerMinute: number;
  monthlyNotificationAllowance: number;
}

export interface Identity {
  key: {
    id: string;
    name: string;
    origin: 'dashboard' | 'runtime' | 'connector' | 'bound';
    scopes: string[];
    boundExternalId: string | null;
    createdAt: string;
    lastUsedAt: string | null;
    expiresAt: string | null;
  };
  site: Site;
  workspace: { id: string; name: string; approvalMode: 'browser' | 'terminal' };
  plan: Plan;
}

export interface ChannelCounts {
  nativeAppDevices: number;
  browserSubscriptions: number;
}

export interface Channels {
  keyOwner: ChannelCounts & { externalId: string; reachable: boolean };
  site: ChannelCounts;
}

export interface Machine {
  id: string;
  name: string;
  platform: string;
  keyId: string;
  firstSeenAt: string;
  lastSeenAt: string;
}

export interface MachineReport {
  /** 1–128 of `A-Z a-z 0-9 . _ : -`, stable per machine. */
  machineId: string;
  name?: string;
  platform?: string;
}

// ---- Notifications ----

export interface Targeting {
  subscriberIds?: string[];
  externalIds?: string[];
  tags?: string[];
}

export interface SendRequest extends Targeting {
  title: string;
  body: string;
  url?: string;
  iconUrl?: string;
  imageUrl?: string;
  idempotencyKey?: string;
}

export interface SendResult {
  success: boolean;
  status: 'queued';
  campaignId: string;
  sent: number;
  limits: { remaining: number; limit: number };
  duplicate: boolean;
}

export interface Notification {
  id: string;
  status: 'queued' | 'sending' | 'completed';
  title: string;
  body: string;
  url: string | null;
  iconUrl: string | null;
  imageUrl: string | null;
  createdAt: string;
  completedAt: string | null;
  counts: { targeted: number; queued: number; delivered: number; failed: number; expired: number; pending: number };
  lastDelivery: { statusCode: number; outcome: string; reportedAt: string } | null;
}

export type RecipientStatus = 'sending' | 'retrying' | 'delivered' | 'failed' | 'expired';

export interface Recipient {
  subscriberId: string;
  status: RecipientStatus;
  attempts: number;
  lastStatusCode: number | null;
  updatedAt: string;
}

export interface Page<T> {
  data: T[];
  hasMore: boolean;
  nextCursor: string | null;
}

export interface RecipientQuery {
  limit?: number;
  cursor?: string;
  status?: RecipientStatus;
}

// ---- Subscribers ----

export type SubscriberStatus = 'active' | 'unsubscribed' | 'expired' | 'bounced';

export interface Subscriber {
  id: string;
  siteId: string;
  status: SubscriberStatus;
  externalId: string | null;
  tags: string[];
  customData: Record<string, unknown>;
  browser: string | null;
  os: string | null;
  country: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface SubscriberDetail extends Subscriber {
  delivery: { pushService: string | null; reachable: boolean; unsubscribedAt: string | null };
  device: { browser: string | null; os: string | null; language: string | null; timezone: string | null };
}

export interface SubscriberQuery {
  limit?: number;
  cursor?: string;
  status?: SubscriberStatus;
  /** The subscriber must hold every tag. */
  tags?: string[];
  externalId?: string;
}

export interface SubscriberCounts {
  total: number;
  active: number;
  unsubscribed: number;
}

export interface SubscriberUpdate {
  tags?: string[];
  /** `null` clears it. */
  externalId?: string | null;
  customData?: Record<string, unknown>;
}

// ---- Policy ----

export interface AuthorizeRequest {
  toolName: string;
  toolTarget?: string;
  actor?: string;
  environment?: string;
  parameters?: Record<string, Scalar>;
  externalId?: string;
}

export type VerdictName = 'allow' | 'deny' | 'requires_human';

export interface Verdict {
  verdict: VerdictName;
  policy: string | null;
  reason: string;
  authorizationId: string;
}

export interface PolicyDocument {
  policy: string | null;
  version: number;
  updatedAt: string | null;
}

// ---- Keys and enrollment ----

export interface BoundKey {
  id: string;
  name: string;
  externalId: string;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
  revoked: boolean;
  revokedAt: string | null;
}

export interface CreateKeyRequest {
  externalId: string;
  name?: string;
  expiresInSeconds?: number;
}

export interface CreatedKey {
  key: BoundKey;
  /** `pk_<id>.<secret>`: returned once, never again. */
  apiKey: string;
}

export interface Enrollment {
  enrollmentUrl: string;
  expiresAt: string;
  externalId: string;
}

// ---- Questions: /ask and /decisions ----

export type QuestionType = 'confirm' | 'select' | 'input';

export interface Question {
  question: string;
  type?: QuestionType;
  /** Required for select, refused otherwise. */
  options?: string[];
  context?: string;
  placeholder?: string;
  agentName?: string;
  callbackUrl?: string;
  /** How long this call waits, 1–55 seconds. */
  timeoutSeconds?: number;
}

export interface AskRequest extends Question, Targeting {
  /** Default true: hold the call up to `timeoutSeconds` for the answer. */
  wait?: boolean;
}

export interface AskRecord {
  correlationId: string;
  question: string;
  type: QuestionType;
  /** `timeout` with `expiresInSeconds > 0`: this call's wait ran out, the question is still open. */
  status: 'pending' | 'answered' | 'timeout' | 'withdrawn';
  answered: boolean;
  value?: string;
  liveUrl: string;
  pollUrl: string;
  expiresInSeconds: number;
  mode: 'browser' | 'terminal';
  hint?: string;
}

export interface DecisionRequest extends Question {
  externalId?: string;
  audience?: 'user' | 'owner' | 'team';
  wait?: boolean;
  /** How long it stays answerable: 60–86,400 seconds (default 3,600). */
  expiresInSeconds?: number;
  requireReachable?: boolean;
  idempotencyKey?: string;
  toolName?: string;
  toolTarget?: string;
  parameters?: Record<string, Scalar>;
}

export interface Reachability {
  reachable: boolean;
  browserSubscriptions: number;
  nativeAppDevices: number;
}

export interface Decision {
  decisionId: string;
  status: 'pending' | 'answered' | 'expired' | 'cancelled';
  /** True only for the answer yes to a confirm decision. */
  approved: boolean;
  answer: string | null;
  question: string;
  type: QuestionType;
  options: string[];
  context: string | null;
  placeholder: string | null;
  agentName: string | null;
  audience: 'user' | 'owner' | 'team';
  externalId: string | null;
  toolName: string | null;
  toolTarget: string | null;
  parameters: Record<string, Scalar> | null;
  mode: 'browser' | 'terminal';
  pollUrl: string;
  decisionPageUrl: string;
  expiresInSeconds: number;
  expiresAt: string;
  createdAt: string;
  answeredAt: string | null;
  cancelledAt: string | null;
  reachability: Reachability;
  idempotencyKey: string | null;
  duplicate: boolean;
}

export interface PersonReachability extends Reachability {
  externalId: string;
  channels: Array<'native_app' | 'browser'>;
}

// ---- Webhooks ----

export interface WebhookSecret {
  /** `whsec_<base64 of 32 bytes>`. */
  secret: string;
  createdAt: string;
  previousSecretExpiresAt: string | null;
}

export interface WebhookEvent<T = Record<string, unknown>> {
  type: string;
  timestamp: string;
  data: T;
}
