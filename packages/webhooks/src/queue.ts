import { fileURLToPath } from 'node:url';

import { assertSchemaName, type MigrationSource, type PoolClient } from '@herald/db';
import { randomId } from '@herald/domain';

/** Its tables (webhook_messages, webhook_attempts), applied in the host service's own schema beside its migrations. */
export const webhookMigrations: MigrationSource = {
  track: 'webhooks',
  dir: fileURLToPath(new URL('../../migrations', import.meta.url)),
};

export interface WebhookEvent {
  workspaceId: string;
  url: string;
  type: string;
  /** JSON-serialisable */
  data: unknown;
}

/** Larger bodies are a bug in the caller, not something to post. */
const MAX_BODY_BYTES = 256 * 1024;

export const channelOf = (schema: string): string => `${schema}_webhooks`;

/**
 * Inside the caller's transaction: the webhook is sent only if that transaction commits. Returns
 * the webhook id ("msg_…"), which receivers see as webhook-id on every attempt.
 */
export async function enqueueWebhook(tx: PoolClient, schema: string, event: WebhookEvent): Promise<string> {
  assertSchemaName(schema);
  if (event.type === '') throw new Error('a webhook needs a type');
  const id = `msg_${randomId(24)}`;
  const body = JSON.stringify({ type: event.type, timestamp: new Date().toISOString(), data: event.data ?? null });
  if (Buffer.byteLength(body) > MAX_BODY_BYTES) throw new Error(`webhook ${event.type} is over ${MAX_BODY_BYTES} bytes`);
  await tx.query(`INSERT INTO ${schema}.webhook_messages (id, workspace_id, url, type, body) VALUES ($1, $2, $3, $4, $5)`, [
    id,
    event.workspaceId,
    event.url,
    event.type,
    body,
  ]);
  // Delivered at commit only, so the dispatcher never wakes for a rolled-back webhook.
  await tx.query(`NOTIFY ${channelOf(schema)}`);
  return id;
}
