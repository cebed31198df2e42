import {
  credentials,
  Metadata,
  type CallOptions,
  type Client,
  type ClientReadableStream,
  type ClientUnaryCall,
  type ServiceError,
} from '@grpc/grpc-js';

import { fromGrpcError } from './errors.js';

type Callback<Res> = (error: ServiceError | null, response: Res) => void;

export interface CallSettings {
  /** Overrides the client's default deadline for this call. */
  deadlineMs?: number;
  metadata?: Metadata;
}

/**
 * The last overload ts-proto generates: (request, metadata, options, callback) for unary calls,
 * (request, metadata, options) returning a readable stream for server streaming. A stream has no
 * deadline unless the settings give one.
 */
type Promisify<F> = F extends (request: infer Req, metadata?: Metadata, options?: Partial<CallOptions>) => ClientReadableStream<infer Res>
  ? (request: Req, settings?: CallSettings) => AsyncIterable<Res>
  : F extends (request: infer Req, metadata: Metadata, options: Partial<CallOptions>, callback: Callback<infer Res>) => ClientUnaryCall
    ? (request: Req, settings?: CallSettings) => Promise<Res>
    : never;

export type PromiseClient<C> = {
  [K in keyof C as Promisify<C[K]> extends never ? never : K]: Promisify<C[K]>;
} & { close(): void };

type ClientConstructor<C> = new (address: string, creds: ReturnType<typeof credentials.createInsecure>, options?: object) => C;

/**
 * A promise-returning client in which every call has a deadline, and every failure arrives as a
 * HeraldError (see fromGrpcError), so callers never see raw gRPC statuses.
 */
export function createClient<C extends Client>(
  Constructor: ClientConstructor<C>,
  address: string,
  defaultDeadlineMs = 5_000,
): PromiseClient<C> {
  const client = new Constructor(address, credentials.createInsecure(), {
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
  });
  const wrapped: Record<string, unknown> = { close: () => client.close() };
  let proto: object | null = Object.getPrototypeOf(client) as object | null;
  while (proto && proto !== Object.prototype) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      const method = (client as unknown as Record<string, unknown>)[name];
      if (name === 'constructor' || name in wrapped || typeof method !== 'function' || !isRpc(method)) continue;
      if ((method as { responseStream?: boolean }).responseStream) {
        wrapped[name] = (request: unknown, settings: CallSettings = {}) =>
          readStream(() =>
            (method as (...args: unknown[]) => ClientReadableStream<unknown>).call(
              client,
              request,
              settings.metadata ?? new Metadata(),
              settings.deadlineMs === undefined ? {} : { deadline: new Date(Date.now() + settings.deadlineMs) },
            ),
          );
        continue;
      }
      wrapped[name] = (request: unknown, settings: CallSettings = {}) =>
        new Promise((resolve, reject) => {
          const deadline = new Date(Date.now() + (settings.deadlineMs ?? defaultDeadlineMs));
          (method as (...args: unknown[]) => unknown).call(
            client,
            request,
            settings.metadata ?? new Metadata(),
            { deadline },
            (err: ServiceError | null, response: unknown) => (err ? reject(fromGrpcError(err)) : resolve(response)),
          );
        });
    }
    proto = Object.getPrototypeOf(proto) as object | null;
  }
  return wrapped as PromiseClient<C>;
}

/** Yields the stream's messages; a consumer that stops early cancels the call. */
async function* readStream<T>(open: () => ClientReadableStream<T>): AsyncIterable<T> {
  const call = open();
  let finished = false;
  try {
    for await (const message of call) yield message as T;
    finished = true;
  } catch (err) {
    finished = true;
    throw fromGrpcError(err as ServiceError);
  } finally {
    if (!finished) call.cancel();
  }
}

/** makeGenericClientConstructor attaches the method definition to each generated RPC method. */
function isRpc(method: unknown): boolean {
  return typeof (method as { path?: unknown }).path === 'string';
}
