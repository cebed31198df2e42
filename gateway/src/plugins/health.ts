import { Type } from '@sinclair/typebox';
import fp from 'fastify-plugin';

export interface HealthOptions {
  /** Called once when the drain starts (before the server stops taking connections). */
  onDrain(): void;
}

const Status = Type.Object({ status: Type.String() });

/**
 * GET /healthz (the process is alive) and GET /readyz (it takes traffic), what the chart probes.
 * Once the drain begins readiness fails without a handler: the server refuses new connections and
 * answers 503 on open ones (return503OnClosing). While draining, each response also closes its
 * connection, so kept-alive clients move to another replica and close() is not held up until
 * their sockets time out.
 */
export const health = fp<HealthOptions>(
  async (app, { onDrain }) => {
    let draining = false;
    app.addHook('preClose', async () => {
      draining = true;
      onDrain();
    });
    app.addHook('onSend', async (_request, reply) => {
      if (draining) reply.header('connection', 'close');
    });
    app.get('/healthz', { schema: { response: { 200: Status } } }, async () => ({ status: 'ok' }));
    app.get('/readyz', { schema: { response: { 200: Status } } }, async () => ({ status: 'ready' }));
  },
  { name: 'herald-health' },
);
