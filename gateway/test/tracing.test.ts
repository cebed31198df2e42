import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { after, before, test } from 'node:test';

import { call, createWorkspace, SERVER_API, startStack, type Stack } from '@herald/testkit';

// Trace context crosses HTTP -> gateway -> gRPC -> account service: both processes export spans of
// the caller's trace to an OTLP receiver (a stand-in for the collector, which is outside Herald).

interface ExportedSpan {
  traceId: string;
  service: string;
  name: string;
}

const exported: ExportedSpan[] = [];
let receiver: Server;
let stack: Stack;

before(async () => {
  receiver = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      assert.equal(request.url, '/v1/traces');
      const payload = JSON.parse(body) as {
        resourceSpans: Array<{
          resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> };
          scopeSpans: Array<{ spans: Array<{ traceId: string; name: string }> }>;
        }>;
      };
      for (const resourceSpan of payload.resourceSpans) {
        const service = resourceSpan.resource.attributes.find((attribute) => attribute.key === 'service.name')?.value.stringValue ?? '';
        for (const scope of resourceSpan.scopeSpans) {
          for (const span of scope.spans) exported.push({ traceId: span.traceId, service, name: span.name });
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const address = receiver.address();
  assert.ok(address && typeof address === 'object');
  stack = await startStack({
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${address.port}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    },
  });
});

after(async () => {
  await stack.stop();
  await new Promise((resolve) => receiver.close(resolve));
});

test("a caller's trace continues through the gateway into the account service, and into the logs", async () => {
  const workspace = await createWorkspace('growth');
  const traceId = randomBytes(16).toString('hex');
  const response = await call(stack.gatewayUrl, `${SERVER_API}/identity`, {
    key: workspace.apiKey,
    headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
  });
  assert.equal(response.status, 200);
  const deadline = Date.now() + 10_000;
  const servicesOf = () => new Set(exported.filter((span) => span.traceId === traceId).map((span) => span.service));
  while (!(servicesOf().has('herald-gateway') && servicesOf().has('herald-account')) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.deepEqual([...servicesOf()].sort(), ['herald-account', 'herald-gateway']);
  const accountSpans = exported.filter((span) => span.traceId === traceId && span.service === 'herald-account').map((span) => span.name);
  assert.ok(accountSpans.includes('grpc.herald.account.v1.AccountService/GetIdentity'), accountSpans.join(', '));
  assert.match(stack.gateways[0]?.output() ?? '', new RegExp(`"traceId":"${traceId}"`));
});
