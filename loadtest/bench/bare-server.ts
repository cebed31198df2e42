// Baseline for the benchmark: the smallest fastify app, GET / -> a small JSON object.
// Same fastify version as the gateway, no logger, no hooks. PORT from the environment.
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.get('/', async () => ({ ok: true, service: 'bare', version: 1 }));
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });

const close = (): void => {
  void app.close().then(() => process.exit(0));
};
process.once('SIGTERM', close);
process.once('SIGINT', close);
