import { context, metrics, propagation, type TextMapGetter, type TextMapSetter } from '@opentelemetry/api';

/**
 * W3C trace context in and out of carriers that the auto-instrumentations do not cover
 * (Kafka headers). HTTP and gRPC are propagated by their instrumentations.
 */
const headerSetter: TextMapSetter<Record<string, string>> = {
  set: (carrier, key, value) => {
    carrier[key] = value;
  },
};

const headerGetter: TextMapGetter<Record<string, Buffer | string | undefined>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => {
    const value = carrier[key];
    return value === undefined ? undefined : value.toString();
  },
};

/** Trace headers (traceparent, tracestate) for the active context. */
export function currentTraceHeaders(): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier, headerSetter);
  return carrier;
}

/** Runs `fn` inside the trace context carried by message headers. */
export function withTraceHeaders<T>(headers: Record<string, Buffer | string | undefined>, fn: () => T): T {
  return context.with(propagation.extract(context.active(), headers, headerGetter), fn);
}

/**
 * A histogram of the service's OpenTelemetry meter. Exported with the SDK's metric pipeline, which
 * is off unless the operator sets OTEL_METRICS_EXPORTER (e.g. otlp); recording costs nothing then.
 */
export function histogram(service: string, name: string, options: { description: string; unit: string }) {
  return metrics.getMeter(`herald-${service}`).createHistogram(name, options);
}
