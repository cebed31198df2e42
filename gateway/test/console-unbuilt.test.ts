import assert from 'node:assert/strict';
import { test } from 'node:test';

import Fastify from 'fastify';

import { installErrorHandling } from '../src/errors.js';
import { consoleRoutes } from '../src/routes/console.js';

// A gateway whose console was not built (npm run build bundles it) says so on every console path:
// 503 in the spec's error shape, never a 404 or a 500. (The built console is tested in real
// browsers by console/test.)

test('an unbuilt console answers 503 unavailable with the hint to build it', async () => {
  const app = Fastify({ logger: false });
  installErrorHandling(app, { documentationBase: 'http://localhost:8080/docs/errors', openapiUrl: '/openapi.json', bodyLimit: 1024, upgradeUrl: 'http://localhost:8080/upgrade' });
  await app.register(consoleRoutes(undefined));
  for (const url of ['/console', '/console/', '/console/keys', '/console/assets/main-ABCDEFGH.js']) {
    const response = await app.inject({ method: 'GET', url });
    assert.equal(response.statusCode, 503, url);
    assert.deepEqual(response.json(), {
      error: 'Unavailable',
      code: 'unavailable',
      status: 503,
      message: 'The console is not built on this server.',
      hint: 'Run npm run build (it bundles console/).',
      documentation: 'http://localhost:8080/docs/errors#unavailable',
    });
  }
  await app.close();
});
