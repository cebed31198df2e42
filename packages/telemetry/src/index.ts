import { context, metrics, propagation, type TextMapGetter, type TextMapSetter } from '@opentelemetry/api';
import { getRPCMetadata, RPCType } from '@opentelemetry/core';

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
 * The meter of one of Herald's components ("delivery", "bus", "gateway", ...). Every process
 * serves its metrics on /metrics (see register.ts) and exports them over OTLP when configured;
 * each component declares its instruments once, in its own metrics module.
 */
export function meter(component: string) {
  return metrics.getMeter(`herald-${component}`);
}

/** Bucket boundaries of durations in seconds: 1 ms to 60 s. */
export const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** A histogram of durations in seconds, with buckets from 1 ms to 60 s. */
export function secondsHistogram(component: string, name: string, description: string) {
  return meter(component).createHistogram(name, { description, unit: 's', advice: { explicitBucketBoundaries: SECONDS_BUCKETS } });
}

export { DEFAULT_METRICS_PORT, metricsEndpoint } from './endpoint.js';

/**
 * Names the route template ("/api/v1/server/campaigns/:id") of the HTTP request being served, so
 * `http.server.request.duration` is labelled per route (never per concrete path, which holds ids).
 */
export function setHttpRoute(route: string): void {
  const rpc = getRPCMetadata(context.active());
  if (rpc?.type === RPCType.HTTP) rpc.route = route;
}
