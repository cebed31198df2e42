import { drainOnSignal, loadConfig } from '@herald/config';
import { createPool, migrate } from '@herald/db';
import { startGrpcServer } from '@herald/grpc';
import { createLogger } from '@herald/logging';
import { PolicyServiceService } from '@herald/proto/herald/policy/v1/policy';

import { PolicyCache } from './cache.js';
import { readConfig } from './config.js';
import { policyHandlers } from './handlers.js';
import { migrationsDir, SCHEMA } from './store.js';

const config = loadConfig(readConfig);
const logger = createLogger('policy');
const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, max: config.databasePoolSize, applicationName: 'herald-policy', logger });
await migrate(pool, SCHEMA, [{ track: 'service', dir: migrationsDir }], logger);
const cache = new PolicyCache(pool, config.policyCacheSize);
const server = await startGrpcServer(config.grpcHost, config.grpcPort, [[PolicyServiceService, policyHandlers(pool, cache, logger)]]);
logger.info({ port: server.port }, 'policy service serving');

drainOnSignal(
  async () => {
    await server.drain(config.shutdownGraceMs);
    await pool.end();
  },
  config.shutdownGraceMs,
  (message, err) => logger.info({ err }, message),
);
