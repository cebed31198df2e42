import { createClient, type PromiseClient } from '@herald/grpc';
import { AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import { SegmentServiceClient } from '@herald/proto/herald/audience/v1/segments';
import { createDatabase, createKafkaNamespace, freePort, infrastructureEnv, requiredEnv, startProcess } from '@herald/testkit';

export interface AudienceService {
  client: PromiseClient<AudienceServiceClient>;
  /** The same process's SegmentService. */
  segments: PromiseClient<SegmentServiceClient>;
  /** The Kafka namespace (HERALD_NAMESPACE) of this service process alone. */
  topicPrefix: string;
  /** DATABASE_URL of the service. */
  databaseUrl: string;
  stop(): Promise<void>;
}

/**
 * The audience service as its own process with a gRPC client, in a Kafka namespace of its own;
 * with `ownDatabase`, also in a database of its own, so that its outbox relay is the only one
 * publishing what it writes (another file's audience process would lead the shared schema's relay).
 */
export async function startAudience({ ownDatabase = false } = {}): Promise<AudienceService> {
  const [namespace, database] = await Promise.all([createKafkaNamespace(), ownDatabase ? createDatabase() : undefined]);
  const databaseUrl = database?.url ?? requiredEnv('DATABASE_URL');
  const port = await freePort();
  const service = await startProcess(
    'audience',
    'services/audience/dist/src/main.js',
    { ...infrastructureEnv(), DATABASE_URL: databaseUrl, GRPC_PORT: String(port), HERALD_NAMESPACE: namespace.prefix },
    /audience service serving/,
  );
  const client = createClient(AudienceServiceClient, `127.0.0.1:${port}`, 10_000);
  const segments = createClient(SegmentServiceClient, `127.0.0.1:${port}`, 10_000);
  return {
    client,
    segments,
    topicPrefix: namespace.prefix,
    databaseUrl,
    async stop() {
      client.close();
      segments.close();
      await service.stop();
      await Promise.all([namespace.remove(), database?.drop()]);
    },
  };
}
