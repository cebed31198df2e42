/**
 * Loaded with `node --import @herald/telemetry/register` so the SDK patches http, gRPC, pg and
 * ioredis before any of them is imported. Traces are exported over OTLP when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set. Without it, spans are neither recorded nor exported, but
 * every request still gets a real trace id: it reaches the logs and travels on to gRPC and Kafka.
 */
import { register } from 'node:module';

import { GrpcInstrumentation } from '@opentelemetry/instrumentation-grpc';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { NodeSDK, tracing } from '@opentelemetry/sdk-node';

const exporting = Boolean(process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);

/** Drops spans; its presence makes the SDK install a tracer provider (and so real trace ids). */
const discardSpans = {
  onStart: () => undefined,
  onEnd: () => undefined,
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
};

if (process.env.OTEL_SDK_DISABLED !== 'true') {
  // ESM imports bypass require(); this loader hook lets the instrumentations patch them too.
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);
  // Herald exports traces only; unset, the SDK would also build OTLP metric and log pipelines
  // pointed at localhost and pay for them on every request.
  process.env.OTEL_METRICS_EXPORTER ??= 'none';
  process.env.OTEL_LOGS_EXPORTER ??= 'none';
  const sdk = new NodeSDK({
    serviceName: process.env.OTEL_SERVICE_NAME ?? process.env.HERALD_SERVICE ?? 'herald',
    // Not exporting: a span that is not sampled still carries a fresh trace id, at a fraction of
    // the cost of recording it.
    ...(exporting ? {} : { spanProcessors: [discardSpans], sampler: new tracing.AlwaysOffSampler() }),
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
