/**
 * Errors the sending engine raises. Input problems are `TypeError`/`RangeError` subclasses (the caller's
 * bug or a bad subscription: never worth retrying); everything that went wrong on the wire is a
 * `PushNetworkError` carrying a `retryable` flag.
 */

/** A subscription's `p256dh` or `auth` is malformed; the subscription can never receive a message. */
export class InvalidSubscriptionError extends TypeError {
  override readonly name = 'InvalidSubscriptionError';
  constructor(
    readonly field: 'p256dh' | 'auth',
    message: string,
  ) {
    super(message);
  }
}

/** The payload does not fit the single 4096-byte record a push service must accept (answer 400/413 up front). */
export class PayloadTooLargeError extends RangeError {
  override readonly name = 'PayloadTooLargeError';
  constructor(
    readonly size: number,
    readonly limit: number,
  ) {
    super(`payload of ${size} bytes exceeds the Web Push limit of ${limit} bytes of plaintext (RFC 8291 section 4)`);
  }
}

/**
 * What went wrong on the wire:
 * - `CONNECT`: TCP/DNS/TLS handshake failed or timed out. The request was never sent.
 * - `TLS`: the peer's certificate was not trusted (not retryable: fix the CA configuration).
 * - `TIMEOUT`: no response within `requestTimeoutMs`. The push service may have accepted the message.
 * - `RESET`: the stream or connection broke after the request was sent. It may have been accepted.
 * - `REFUSED`: the push service refused the stream unprocessed (GOAWAY / REFUSED_STREAM) more often than the
 *   client retries internally.
 * - `QUEUE_FULL`: too many requests waiting for this origin (back-pressure). Never sent.
 * - `CLOSED`: the client was closed before the request could complete.
 */
export type PushNetworkErrorCode = 'CONNECT' | 'TLS' | 'TIMEOUT' | 'RESET' | 'REFUSED' | 'QUEUE_FULL' | 'CLOSED';

export class PushNetworkError extends Error {
  override readonly name = 'PushNetworkError';
  constructor(
    message: string,
    readonly code: PushNetworkErrorCode,
    /** Worth retrying later (with backoff). False only for certificate verification failures. */
    readonly retryable: boolean,
    /** The push service may have received (and accepted) the request; a retry may duplicate it. */
    readonly maybeDelivered: boolean,
    /** The push-service origin, e.g. `https://fcm.googleapis.com`. */
    readonly origin: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
