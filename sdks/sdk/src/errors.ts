/**
 * Typed errors. Every non-2xx answer becomes a HeraldError subclass chosen by the status; branch on
 * the class (or `status`) and on `code`, never on the message.
 */

/** The spec's error body; some answers carry fewer fields (a 429 beyond 25 pending asks has only `error`). */
export interface ErrorBody {
  error?: string;
  code?: string;
  status?: number;
  message?: string;
  hint?: string;
  documentation?: string;
  fields?: Array<{ field: string; in: string; problem: string }>;
  upgradeUrl?: string;
  [extra: string]: unknown;
}

export class HeraldError extends Error {
  /** HTTP status; 0 when no answer arrived (RequestTimeoutError, APIConnectionError). */
  readonly status: number;
  /** The body's machine-readable `code`, when it has one. */
  readonly code: string | undefined;
  /** The parsed body (or `{error: <text>}` for a body that is not JSON). */
  readonly body: ErrorBody;
  /** Seconds to wait, from `Retry-After`, when the answer had one. */
  readonly retryAfter: number | undefined;

  constructor(status: number, body: ErrorBody, retryAfter?: number) {
    super(body.message ?? body.error ?? `HTTP ${status}`);
    this.name = new.target.name;
    this.status = status;
    this.code = body.code;
    this.body = body;
    this.retryAfter = retryAfter;
  }
}

/** 400 `invalid_request`; `fields` names each bad field. */
export class ValidationError extends HeraldError {
  get fields(): NonNullable<ErrorBody['fields']> {
    return this.body.fields ?? [];
  }
}
/** 401: a missing, malformed, unknown, revoked or expired key. */
export class AuthenticationError extends HeraldError {}
/** 403: the key's origin or the plan does not allow it (`code` says which). */
export class PermissionError extends HeraldError {}
export class NotFoundError extends HeraldError {}
/** 409: already answered, an idempotency key reused for another request, an unreachable person. */
export class ConflictError extends HeraldError {}
/** 410: e.g. an expired enrollment link. */
export class GoneError extends HeraldError {}
/** 429: `retryAfter` says when to try again (absent beyond 25 pending asks). */
export class RateLimitError extends HeraldError {}
/** 5xx. */
export class ServerError extends HeraldError {}
/** The request's time-out passed before an answer came. */
export class RequestTimeoutError extends HeraldError {}
/** No HTTP answer at all (refused connection, DNS failure, reset). */
export class APIConnectionError extends HeraldError {}

const byStatus: Record<number, typeof HeraldError> = {
  400: ValidationError,
  401: AuthenticationError,
  403: PermissionError,
  404: NotFoundError,
  409: ConflictError,
  410: GoneError,
  429: RateLimitError,
};

export function errorFor(status: number, body: ErrorBody, retryAfter?: number): HeraldError {
  const ErrorClass = byStatus[status] ?? (status >= 500 ? ServerError : HeraldError);
  return new ErrorClass(status, body, retryAfter);
}

/** Thrown by verifyWebhook: no signature matches, the timestamp is outside the tolerance, or a header is missing. */
export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
}
