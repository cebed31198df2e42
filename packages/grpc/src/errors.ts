import { Metadata, status as GrpcStatus, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import { backingServiceUnavailable, HeraldError, isBackingServiceDown, isErrorCode, type ErrorCode } from '@herald/errors';

/**
 * Carrying HeraldError across gRPC, and the gRPC -> HTTP mapping, done once. A service throws a
 * HeraldError; its code, title, hint and extra fields travel in the `herald-error` trailer; the
 * gateway turns the status back into the same HeraldError (and so the same HTTP status).
 */

const ERROR_TRAILER = 'herald-error';

const grpcStatusByCode: Record<ErrorCode, GrpcStatus> = {
  invalid_request: GrpcStatus.INVALID_ARGUMENT,
  unauthorized: GrpcStatus.UNAUTHENTICATED,
  forbidden: GrpcStatus.PERMISSION_DENIED,
  subscription_required: GrpcStatus.PERMISSION_DENIED,
  plan_limit_exceeded: GrpcStatus.PERMISSION_DENIED,
  plan_upgrade_required: GrpcStatus.PERMISSION_DENIED,
  partner_decision_required: GrpcStatus.PERMISSION_DENIED,
  not_found: GrpcStatus.NOT_FOUND,
  method_not_allowed: GrpcStatus.UNIMPLEMENTED,
  conflict: GrpcStatus.FAILED_PRECONDITION,
  gone: GrpcStatus.FAILED_PRECONDITION,
  rate_limited: GrpcStatus.RESOURCE_EXHAUSTED,
  unavailable: GrpcStatus.UNAVAILABLE,
  internal_error: GrpcStatus.INTERNAL,
};

/** For a status that arrives without a Herald trailer (a proxy, a deadline, a crashed peer). */
const codeByGrpcStatus: Partial<Record<GrpcStatus, ErrorCode>> = {
  [GrpcStatus.INVALID_ARGUMENT]: 'invalid_request',
  [GrpcStatus.UNAUTHENTICATED]: 'unauthorized',
  [GrpcStatus.PERMISSION_DENIED]: 'forbidden',
  [GrpcStatus.NOT_FOUND]: 'not_found',
  [GrpcStatus.ALREADY_EXISTS]: 'conflict',
  [GrpcStatus.FAILED_PRECONDITION]: 'conflict',
  [GrpcStatus.RESOURCE_EXHAUSTED]: 'rate_limited',
  [GrpcStatus.UNAVAILABLE]: 'unavailable',
  [GrpcStatus.DEADLINE_EXCEEDED]: 'unavailable',
};

/**
 * A metadata value must be printable ASCII, else grpc-js throws (and a message echoing a client's
 * non-ASCII input would crash the service): everything else travels as JSON \u escapes.
 */
const asciiJson = (value: unknown): string =>
  JSON.stringify(value).replace(/[^\x20-\x7e]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);

export function toGrpcStatus(thrown: unknown): Partial<StatusObject> {
  // A database or broker that is restarting is the caller's 503 (retry), not a bug of ours.
  const err = isBackingServiceDown(thrown) ? backingServiceUnavailable() : thrown;
  if (err instanceof HeraldError) {
    const metadata = new Metadata();
    metadata.set(ERROR_TRAILER, asciiJson({ code: err.code, title: err.title, hint: err.hint, extra: err.extra }));
    return { code: grpcStatusByCode[err.code], details: err.message, metadata };
  }
  // Anything else is a bug: its text stays in the service's log, never on the wire.
  return { code: GrpcStatus.INTERNAL, details: 'internal error' };
}

interface ErrorTrailer {
  code?: string;
  title?: string;
  hint?: string;
  extra?: Record<string, unknown>;
}

export function fromGrpcError(err: ServiceError): HeraldError {
  const trailer = err.metadata?.get(ERROR_TRAILER)[0];
  if (typeof trailer === 'string') {
    try {
      const parsed = JSON.parse(trailer) as ErrorTrailer;
      if (parsed.code && isErrorCode(parsed.code)) {
        return new HeraldError(parsed.code, err.details, {
          ...(parsed.title ? { title: parsed.title } : {}),
          ...(parsed.hint ? { hint: parsed.hint } : {}),
          ...(parsed.extra ? { extra: parsed.extra } : {}),
        });
      }
    } catch {
      // fall through to the status mapping
    }
  }
  const code = codeByGrpcStatus[err.code as GrpcStatus];
  if (code === 'unavailable') return new HeraldError('unavailable', 'A backing service is unavailable.');
  if (code) return new HeraldError(code, err.details || 'Request failed.');
  return new HeraldError('internal_error', 'An unexpected error occurred.', { title: 'Internal server error' });
}
