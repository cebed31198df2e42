import type { Fault } from './drill.js';
import { bounceServer, requestsMetIt } from './inject.js';

/**
 * PostgreSQL stopped (`pg_ctl -m fast`) or crashed (`kill -9` of the postmaster: it recovers from
 * its WAL), and started. Requests that need it answer 503 meanwhile; reconciled with every record:
 * each write that got a 2xx is readable after it (commits are durable).
 */
export const postgresRestart: Fault = {
  name: 'postgres-restart',
  inject: (load) => bounceServer(load, 'postgres', 'restart'),
  bit: requestsMetIt,
};

export const postgresCrash: Fault = {
  name: 'postgres-crash',
  inject: (load) => bounceServer(load, 'postgres', 'crash'),
  bit: requestsMetIt,
};
