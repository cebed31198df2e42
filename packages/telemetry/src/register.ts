/**
 * Loaded with `node --import @herald/telemetry/register` so the SDK patches http, gRPC, pg and
 * ioredis before any of them is imported. Traces are exported over OTLP when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set. Without it, spans are neither recorded nor exported, but
 * every request still gets a real trace id: it reaches the logs and travels on to gRPC and Kafka.
 *
 * Metrics: every process serves them for Prometheus on METRICS_HOST:METRICS_PORT (/metrics;
 * defaults 127.0.0.1:9464, METRICS_PORT=0 turns the endpoint off) and, with an OTLP endpoint set,
 * also exports them over OTLP (OTEL_METRICS_EXPORTER=none stops that).
 */
import { register } from 'node:module';

import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { GrpcInstrumentation } from '@opentelemetry/instrumentation-grpc';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { RuntimeNodeInstrumentation } from '@opentelemetry/instrumentation-runtime-node';
import { metrics, NodeSDK, tracing } from '@opentelemetry/sdk-node';

import { metricsEndpoint } from './endpoint.js';

const exporting = Boolean(process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
const exportingMetrics =
  process.env.OTEL_METRICS_EXPORTER !== 'none' && Boolean(process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT);

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
  process.env.OTEL_LOGS_EXPORTER ??= 'none';
  process.env.OTEL_METRICS_EXPORTER ??= 'none';
  const endpoint = metricsEndpoint(process.env);
  const metricReaders: metrics.IMetricReader[] = [];
  if (endpoint) {
    metricReaders.push(
      new PrometheusExporter({ host: endpoint.host, port: endpoint.port }, (err) => {
        // A port taken (two local processes on the default) costs the endpoint, never the process.
        if (err) process.stderr.write(`${JSON.stringify({ level: 'warn', msg: 'metrics endpoint not served', port: endpoint.port, err: String(err) })}\n`);
      }),
    );
  }
  if (exportingMetrics) {
    metricReaders.push(
      new metrics.PeriodicExportingMetricReader({
        exporter: new OTLPMetricExporter(),
        exportIntervalMillis: Number(process.env.OTEL_METRIC_EXPORT_INTERVAL ?? 60_000),
      }),
    );
  }
  const sdk = new NodeSDK({
    serviceName: process.env.OTEL_SERVICE_NAME ?? process.env.HERALD_SERVICE ?? 'herald',
    // Not exporting: a span that is not sampled still carries a fresh trace id, at a fraction of
    // the cost of recording it.
    ...(exporting ? {} : { spanProcessors: [discardSpans], sampler: new tracing.AlwaysOffSampler() }),
    // Given explicitly, the SDK builds no pipeline of its own from the environment. With none (no
    // endpoint, no OTLP), OTEL_METRICS_EXPORTER=none keeps it from making a meter provider at all:
    // every instrument is then a no-op.
    ...(metricReaders.length > 0 ? { metricReaders } : {}),
    instrumentations: [
      // The scrapes of the metrics endpoint are not requests of the component's own.
      new HttpInstrumentation({ ignoreIncomingRequestHook: (request) => endpoint !== undefined && request.socket.localPort === endpoint.port }),
      new GrpcInstrumentation(),
      new PgInstrumentation({ requireParentSpan: true }),
      new IORedisInstrumentation({ requireParentSpan: true }),
      new RuntimeNodeInstrumentation(),
    ],
  });
  sdk.start();
  const shutdown = (): void => {
    void sdk.shutdown().catch(() => undefined);
  };
  process.once('beforeExit', shutdown);
}
