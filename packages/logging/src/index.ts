import { isSpanContextValid, trace } from '@opentelemetry/api';
import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/** Paths whose values never reach a log line, whatever logs them. */
const redactPaths = [
  'authorization',
  'password',
  'secret',
  'apiKey',
  'token',
  '*.authorization',
  '*.password',
  '*.secret',
  '*.apiKey',
  '*.token',
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'databaseUrl',
  'redisUrl',
  'smtpUrl',
  'sessionId',
  'csrfToken',
  '*.databaseUrl',
  '*.redisUrl',
  '*.smtpUrl',
  '*.sessionId',
  '*.csrfToken',
];

/** Full keys look like pk_<id>.<secret>; a message that quotes one keeps only the public id. */
const fullKeyPattern = /\b(pk_[a-z0-9]+)\.(?:sk_)?[A-Za-z0-9_-]{8,}/g;
/** Credentials inside connection strings. */
const urlCredentialPattern = /(\w+:\/\/[^:/\s]+:)[^@/\s]+@/g;

export function scrubSecrets(text: string): string {
  return text.replace(fullKeyPattern, '$1.[redacted]').replace(urlCredentialPattern, '$1[redacted]@');
}

export function createLogger(service: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    name: service,
    level,
    base: { service },
    redact: { paths: redactPaths, censor: '[redacted]' },
    formatters: { level: (label) => ({ level: label }) },
    timestamp: pino.stdTimeFunctions.isoTime,
    hooks: {
      logMethod(args, method) {
        // Scrub the message string of every call; structured fields are covered by `redact`.
        const scrubbed = args.map((arg) => (typeof arg === 'string' ? scrubSecrets(arg) : arg));
        method.apply(this, scrubbed as Parameters<typeof method>);
      },
    },
    serializers: {
      err: (err: unknown) => {
        const serialized = pino.stdSerializers.err(err as Error);
        if (typeof serialized.message === 'string') serialized.message = scrubSecrets(serialized.message);
        if (typeof serialized.stack === 'string') serialized.stack = scrubSecrets(serialized.stack);
        return serialized;
      },
    },
    // Every line carries the active trace, so logs and traces join up.
    mixin() {
      const context = trace.getActiveSpan()?.spanContext();
      if (!context || !isSpanContextValid(context)) return {};
      return { traceId: context.traceId, spanId: context.spanId };
    },
  });
}
