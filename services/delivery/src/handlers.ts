import type { Pool } from '@herald/db';
import { implementService } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import { DeliveryServiceService } from '@herald/proto/herald/delivery/v1/delivery';

import * as store from './store.js';

export function deliveryHandlers(pool: Pool, logger: Logger) {
  return implementService(
    DeliveryServiceService,
    {
      async listDeliveries({ workspaceId, notificationId, limit, cursor, status }) {
        const pageSize = Math.min(Math.max(limit || 100, 1), 100);
        const rows = await store.listDeliveries(pool, { workspaceId, notificationId, after: cursor, status, limit: pageSize + 1 });
        const page = rows.slice(0, pageSize);
        return {
          deliveries: page.map((row) => ({
            subscriberId: row.subscriber_id,
            status: row.status,
            attempts: row.attempts,
            lastStatusCode: row.last_status_code ?? 0,
            updatedAt: row.updated_at.toISOString(),
          })),
          nextCursor: rows.length > pageSize ? (page.at(-1)?.subscriber_id ?? '') : '',
        };
      },
    },
    logger,
  );
}
