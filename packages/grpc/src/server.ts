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

/** A unary RPC written as an async function; thrown HeraldErrors become gRPC statuses. */
export type UnaryHandler<Req, Res> = (request: Req, call: ServerUnaryCall<Req, Res>) => Promise<Res>;

type HandlersOf<S> = {
  [K in keyof S]: S[K] extends { requestDeserialize: (b: Buffer) => infer Req; responseSerialize: (r: infer Res) => Buffer }
    ? UnaryHandler<Req, Res>
    : never;
};

export function unaryImplementation<S extends ServiceDefinition>(
  definition: S,
  handlers: HandlersOf<S>,
  logger: Logger,
): UntypedServiceImplementation {
  const implementation: UntypedServiceImplementation = {};
  for (const name of Object.keys(definition)) {
    const handler = handlers[name as keyof S] as UnaryHandler<unknown, unknown>;
    implementation[name] = (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
      handler(call.request, call).then(
        (response) => callback(null, response),
        (err: unknown) => {
          const status = toGrpcStatus(err);
          if (status.code === GrpcStatus.INTERNAL) logger.error({ err, rpc: definition[name]?.path }, 'rpc failed');
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
