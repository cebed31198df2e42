/**
 * Loaded with `node --import @herald/telemetry/register` so the SDK patches http, gRPC, pg and
 * ioredis before any of them is imported. Traces are exported over OTLP when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set; without it the SDK still propagates context (so trace ids
 * reach logs and downstream services) but exports nothing.
 */
import { register } from 'node:module';

import { GrpcInstrumentation } from '@opentelemetry/instrumentation-grpc';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { NodeSDK } from '@opentelemetry/sdk-node';

const discardSpans = {
  onStart: () => undefined,
  onEnd: () => undefined,
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
};

const exporting = Boolean(process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);

if (process.env.OTEL_SDK_DISABLED !== 'true') {
  // ESM imports bypass require(); this loader hook lets the instrumentations patch them too.
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);
  const sdk = new NodeSDK({
    serviceName: process.env.OTEL_SERVICE_NAME ?? process.env.HERALD_SERVICE ?? 'herald',
    // Without an exporter the SDK would fall back to OTLP on localhost (and log every failed
    // export); a processor that drops spans keeps real trace ids flowing into logs and headers.
    ...(exporting ? {} : { spanProcessors: [discardSpans] }),
    instrumentations: [
      new HttpInstrumentation(),
      new GrpcInstrumentation(),
      new PgInstrumentation({ requireParentSpan: true }),
      new IORedisInstrumentation({ requireParentSpan: true }),
    ],
  });
  sdk.start();
  const shutdown = (): void => {
    void sdk.shutdown().catch(() => undefined);
  };
  process.once('beforeExit', shutdown);
}
