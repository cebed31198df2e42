import { status as GrpcStatus } from '@grpc/grpc-js';
import { secondsHistogram } from '@herald/telemetry';

/** gRPC server calls, by OpenTelemetry's RPC semantic conventions (service, method, status). */
const callDuration = secondsHistogram('grpc', 'rpc.server.call.duration', 'Duration of gRPC calls served, to the last message');

/** Records one served call; `path` is the method's "/package.Service/Method". */
export function recordServerCall(path: string, startedAt: number, code: GrpcStatus): void {
  const [, service = '', method = ''] = path.split('/');
  callDuration.record((performance.now() - startedAt) / 1000, {
    'rpc.system': 'grpc',
    'rpc.service': service,
    'rpc.method': method,
    'rpc.grpc.status_code': code,
  });
}
