import assert from 'node:assert/strict';
import { test } from 'node:test';

import { credentials } from '@grpc/grpc-js';
import { createClient } from '@herald/grpc';
import { HealthCheckResponse_ServingStatus as Status, HealthClient, type HealthCheckResponse } from '@herald/proto/grpc/health/v1/health';
import { AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import { freePort, infrastructureEnv, startProcess } from '@herald/testkit';

// The service skeleton seen from outside: gRPC health while serving and while draining, and a
// clean exit on SIGTERM.

test('health reports SERVING, then NOT_SERVING to watchers on SIGTERM, and the process exits 0', async () => {
  const port = await freePort();
  const service = await startProcess('audience', 'services/audience/dist/src/main.js', { ...infrastructureEnv(), GRPC_PORT: String(port) }, /serving/);
  const health = new HealthClient(`127.0.0.1:${port}`, credentials.createInsecure());
  try {
    const checker = createClient(HealthClient, `127.0.0.1:${port}`, 2_000);
    assert.deepEqual(await checker.check({ service: '' }), { status: Status.SERVING });
    checker.close();

    const watched: Status[] = [];
    const stream = health.watch({ service: '' });
    const ended = new Promise<void>((resolve) => {
      stream.on('data', (reply: HealthCheckResponse) => watched.push(reply.status));
      stream.on('end', resolve);
      stream.on('error', () => resolve());
    });
    while (watched.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    service.child.kill('SIGTERM');
    await ended;
    assert.deepEqual(watched, [Status.SERVING, Status.NOT_SERVING]);
    assert.equal(await service.exited, 0);
  } finally {
    health.close();
    await service.stop();
  }
});

test('a workspace without subscribers counts zero', async () => {
  const port = await freePort();
  const service = await startProcess('audience', 'services/audience/dist/src/main.js', { ...infrastructureEnv(), GRPC_PORT: String(port) }, /serving/);
  const client = createClient(AudienceServiceClient, `127.0.0.1:${port}`, 2_000);
  try {
    assert.deepEqual(await client.countSubscriptions({ workspaceId: 'ws_none', externalId: 'owner' }), { siteActive: '0', externalIdActive: '0', siteVerified: '0' });
  } finally {
    client.close();
    await service.stop();
  }
});
