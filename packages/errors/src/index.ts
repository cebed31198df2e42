/**
 * The one error type that crosses Herald's layers. Services throw it, the gRPC layer carries its
 * code across the wire, and the gateway renders it in the spec's shared error shape.
 */

/** Machine-readable codes. Clients branch on status and on these, never on the message. */
export type ErrorCode =
  | 'unauthorized'
  | 'forbidden'
  | 'invalid_request'
  | 'not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'gone'
  | 'subscription_required'
  | 'plan_limit_exceeded'
  | 'plan_upgrade_required'
  | 'partner_decision_required'
  | 'rate_limited'
  | 'unavailable'
  | 'internal_error';

const statusByCode: Record<ErrorCode, number> = {
  unauthorized: 401,
  forbidden: 403,
  invalid_request: 400,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  gone: 410,
  subscription_required: 403,
  plan_limit_exceeded: 403,
  plan_upgrade_required: 403,
  partner_decision_required: 403,
  rate_limited: 429,
  unavailable: 503,
  internal_error: 500,
};

export interface HeraldErrorOptions {
  /** Short human sentence for `error`; defaults to `message`. */
  title?: string;
  hint?: string;
  /** Extra top-level fields of the body, e.g. `upgradeUrl`, `fields`, `allowed`. */
  extra?: Record<string, unknown>;
}

export class HeraldError extends Error {
  readonly status: number;
  readonly title: string;
  readonly hint: string;
  readonly extra: Record<string, unknown>;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: HeraldErrorOptions = {},
  ) {
    super(message);
    this.name = 'HeraldError';
    this.status = statusByCode[code];
    this.title = options.title ?? message;
    this.hint = options.hint ?? defaultHints[code];
    this.extra = options.extra ?? {};
  }
}

const defaultHints: Record<ErrorCode, string> = {
  unauthorized: 'Send a full API key as "Authorization: Bearer pk_<id>.<secret>".',
  forbidden: 'Use a key whose origin and plan include this endpoint.',
  invalid_request: 'Fix the request as the message says and send it again.',
  not_found: 'Check the path and the identifier.',
  method_not_allowed: 'Use one of the methods listed in `allowed`.',
  conflict: 'Read the resource again and decide what to do with its current state.',
  gone: 'It has expired and cannot be used any more; create a new one.',
  subscription_required: 'Choose a plan for this workspace.',
  plan_limit_exceeded: 'Upgrade the plan or wait for the allowance to renew.',
  plan_upgrade_required: 'Upgrade the workspace to a plan that includes this endpoint (see upgradeUrl).',
  partner_decision_required: 'Partner workspaces open questions with POST /api/v1/server/decisions.',
  rate_limited: 'Wait for the number of seconds in Retry-After before sending again.',
  unavailable: 'Retry later; the service is temporarily unavailable.',
  internal_error: 'Retry later; if it persists, report the request id.',
};

/** One bad field of a request: its name (dotted path), where it was sent, and what is wrong. */
export interface FieldProblem {
  field: string;
  /** body, querystring, params or headers. */
  in: string;
  problem: string;
}

/** 400 invalid_request naming each bad field: the message lists them, `fields` carries them. */
export function invalidFields(location: string, fields: FieldProblem[]): HeraldError {
  const summary = fields.map((field) => `${field.field} ${field.problem}`).join('; ');
  return new HeraldError('invalid_request', `Invalid ${location === 'body' ? 'request body' : location}: ${summary}.`, {
    title: 'Invalid request',
    extra: { fields },
  });
}

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(statusByCode, value);
}

/** The spec's shared error shape: `{error, code, status, message, hint, documentation}`. */
export interface ErrorBody {
  error: string;
  code: ErrorCode;
  status: number;
  message: string;
  hint: string;
  documentation: string;
  [extra: string]: unknown;
}

export function errorBody(err: HeraldError, documentationBase: string): ErrorBody {
  return {
    ...err.extra,
    error: err.title,
    code: err.code,
    status: err.status,
    message: err.message,
    hint: err.hint,
    documentation: `${documentationBase}#${err.code}`,
  };
}

/** Socket-level failures: the peer is down, restarting or unreachable. */
const networkErrnos = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
/**
 * PostgreSQL SQLSTATEs of a server that is restarting, failing over or full: class 08 (connection
 * exception), 57P01-57P03 (admin shutdown, crash shutdown, cannot connect now), 53300 (too many
 * connections).
 */
const unavailableSqlStates = /^(08...|57P0[123]|53300)$/;
/** Messages of the pg pool and ioredis for a connection that is gone or never came. */
const lostConnectionMessages = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection is closed|Stream isn't writeable)/;

/**
 * True when `err` says a backing service (PostgreSQL, Redis, Kafka) is down or restarting rather
 * than that the request or the code is wrong: it is answered 503 `unavailable`, which a client
 * retries, never 500. Causes are followed, since drivers wrap the socket error.
 */
export function isBackingServiceDown(err: unknown): boolean {
  for (let cause = err, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth += 1) {
    const { code } = cause as { code?: unknown };
    if (typeof code === 'string' && (networkErrnos.has(code) || unavailableSqlStates.test(code))) return true;
    if (lostConnectionMessages.test(cause.message)) return true;
    // kafkajs: a broker that cannot be reached, or retries used up against one.
    if (cause.name === 'KafkaJSConnectionError' || cause.name === 'KafkaJSNumberOfRetriesExceeded' || cause.name === 'KafkaJSRequestTimeoutError') return true;
  }
  return false;
}

/** The 503 a request gets while a backing service is down. */
export function backingServiceUnavailable(): HeraldError {
  return new HeraldError('unavailable', 'A backing service is unavailable; retry shortly.', { title: 'Service unavailable' });
}
