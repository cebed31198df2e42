import type { Pool } from '@herald/db';
import { unaryImplementation } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import { AudienceServiceService } from '@herald/proto/herald/audience/v1/audience';

import * as store from './store.js';

export function audienceHandlers(pool: Pool, logger: Logger) {
  return unaryImplementation(
    AudienceServiceService,
    {
      async countSubscriptions({ workspaceId, externalId }) {
        const counts = await store.countActive(pool, workspaceId, externalId);
        return { siteActive: String(counts.site), externalIdActive: String(counts.externalId) };
      },
    },
    logger,
  );
}
