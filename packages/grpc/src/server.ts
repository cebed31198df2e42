import { once } from 'node:events';

import {
  Server,
  ServerCredentials,
  status as GrpcStatus,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import type { Logger } from '@herald/logging';
import {
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthService,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from '@herald/proto/grpc/health/v1/health';

import { toGrpcStatus } from './errors.js';
import { recordServerCall } from './metrics.js';

/** A unary RPC written as an async function; thrown HeraldErrors become gRPC statuses. */
export type UnaryHandler<Req, Res> = (request: Req, call: ServerUnaryCall<Req, Res>) => Promise<Res>;

/**
 * A server-streaming RPC written as an async generator. Each yielded message waits for the
 * transport to take it (flow control), so a slow client slows the producer instead of filling memory.
 */
export type StreamHandler<Req, Res> = (request: Req, call: ServerWritableStream<Req, Res>) => AsyncIterable<Res>;

type HandlersOf<S> = {
  [K in keyof S]: S[K] extends {
    responseStream: infer Streaming;
    requestDeserialize: (b: Buffer) => infer Req;
    responseSerialize: (r: infer Res) => Buffer;
  }
    ? Streaming extends true
      ? StreamHandler<Req, Res>
      : UnaryHandler<Req, Res>
    : never;
};

export function implementService<S extends ServiceDefinition>(definition: S, handlers: HandlersOf<S>, logger: Logger): UntypedServiceImplementation {
  const implementation: UntypedServiceImplementation = {};
  const fail = (name: string, err: unknown) => {
    const status = toGrpcStatus(err);
    if (status.code === GrpcStatus.INTERNAL) logger.error({ err, rpc: definition[name]?.path }, 'rpc failed');
    return status;
  };
  for (const name of Object.keys(definition)) {
    const path = definition[name]?.path ?? name;
    if (definition[name]?.responseStream) {
      const handler = handlers[name as keyof S] as unknown as StreamHandler<unknown, unknown>;
      implementation[name] = (call: ServerWritableStream<unknown, unknown>) => {
        const startedAt = performance.now();
        void (async () => {
          for await (const message of handler(call.request, call)) {
            if (call.cancelled) return recordServerCall(path, startedAt, GrpcStatus.CANCELLED);
            if (!call.write(message)) await once(call, 'drain');
          }
          call.end();
          recordServerCall(path, startedAt, GrpcStatus.OK);
        })().catch((err: unknown) => {
          const status = fail(name, err);
          recordServerCall(path, startedAt, status.code ?? GrpcStatus.UNKNOWN);
          call.emit('error', status);
        });
      };
      continue;
    }
    const handler = handlers[name as keyof S] as unknown as UnaryHandler<unknown, unknown>;
    implementation[name] = (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
      const startedAt = performance.now();
      handler(call.request, call).then(
        (response) => {
          recordServerCall(path, startedAt, GrpcStatus.OK);
          callback(null, response);
        },
        (err: unknown) => {
          const status = fail(name, err);
          recordServerCall(path, startedAt, status.code ?? GrpcStatus.UNKNOWN);
          callback(status, null);
        },
      );
    };
  }
  return implementation;
}

export interface GrpcServer {
  /** Bound port (useful when asked for port 0). */
  port: number;
  /** Stops accepting, marks health NOT_SERVING, waits for in-flight calls up to `graceMs`. */
  drain(graceMs: number): Promise<void>;
}

export async function startGrpcServer(
  host: string,
  port: number,
  services: Array<[ServiceDefinition, UntypedServiceImplementation]>,
): Promise<GrpcServer> {
  const server = new Server({ 'grpc.max_receive_message_length': 8 * 1024 * 1024 });
  let serving = ServingStatus.SERVING;
  const watchers = new Set<ServerWritableStream<HealthCheckRequest, HealthCheckResponse>>();
  const health: UntypedServiceImplementation = {
    check: (_call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>, callback: sendUnaryData<HealthCheckResponse>) =>
      callback(null, { status: serving }),
    watch: (call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
      watchers.add(call);
      call.write({ status: serving });
      call.on('cancelled', () => watchers.delete(call));
    },
  };
  server.addService(HealthService, health);
  for (const [definition, implementation] of services) server.addService(definition, implementation);
  const boundPort = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
  return {
    port: boundPort,
    async drain(graceMs) {
      serving = ServingStatus.NOT_SERVING;
      for (const watcher of watchers) {
        watcher.write({ status: serving });
        watcher.end();
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}
