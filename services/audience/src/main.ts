import { drainOnSignal, loadConfig } from '@herald/config';
import { createPool, migrate } from '@herald/db';
import { startGrpcServer } from '@herald/grpc';
import { createLogger } from '@herald/logging';
import { AudienceServiceService } from '@herald/proto/herald/audience/v1/audience';

import { readConfig } from './config.js';
import { audienceHandlers } from './handlers.js';
import { migrationsDir, SCHEMA } from './store.js';

const config = loadConfig(readConfig);
const logger = createLogger('audience');
const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, max: config.databasePoolSize, applicationName: 'herald-audience' });
await migrate(pool, SCHEMA, migrationsDir, logger);
const server = await startGrpcServer(config.grpcHost, config.grpcPort, [[AudienceServiceService, audienceHandlers(pool, logger)]]);
logger.info({ port: server.port }, 'audience service serving');

drainOnSignal(
  async () => {
    await server.drain(config.shutdownGraceMs);
    await pool.end();
  },
  config.shutdownGraceMs,
  (message, err) => logger.info({ err }, message),
);
