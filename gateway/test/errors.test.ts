import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, createWorkspace, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';

// 400, 404 and 405 in the spec's error shape; bad input changes nothing.

let stack: Stack;
let workspace: TestWorkspace;

before(async () => {
  stack = await startStack({ gatewayEnv: { BODY_LIMIT_BYTES: '2048' } });
  workspace = await createWorkspace('growth');
});
after(() => stack.stop());

const machines = `${SERVER_API}/machines`;

function invalid(message: string, extra: Record<string, unknown> = {}, error = 'Invalid request') {
  return {
    error,
    code: 'invalid_request',
    status: 400,
    message,
    hint: 'Fix the request as the message says and send it again.',
    documentation: 'http://localhost:8080/docs/errors#invalid_request',
    ...extra,
  };
}

async function post(rawBody: string, contentType = 'application/json') {
  return call(stack.gatewayUrl, machines, { method: 'POST', key: workspace.apiKey, rawBody, headers: { 'content-type': contentType } });
}

test('malformed JSON is 400', async () => {
  const response = await post('{"machineId": ');
  assert.equal(response.status, 400);
  assert.deepEqual(response.body, invalid('The body is not valid JSON.', {}, 'Invalid JSON'));
});

test('a body that is not JSON is 400', async () => {
  const response = await post('machineId=abc', 'text/plain');
  assert.equal(response.status, 400);
  assert.deepEqual(response.body, invalid('The body must be JSON, sent with "Content-Type: application/json".', {}, 'Unsupported content type'));
});

test('an oversized body is 400', async () => {
  const response = await post(JSON.stringify({ machineId: 'm', name: 'x'.repeat(4_000) }));
  assert.equal(response.status, 400);
  assert.deepEqual(response.body, invalid('The body is larger than 2048 bytes.', {}, 'Body too large'));
});

test('wrong types, unknown and missing fields are 400 naming every field', async () => {
  const wrongType = await post(JSON.stringify({ machineId: 5 }));
  assert.equal(wrongType.status, 400);
  assert.deepEqual(
    wrongType.body,
    invalid('Invalid request body: machineId must be string.', { fields: [{ field: 'machineId', in: 'body', problem: 'must be string' }] }),
  );

  const unknownAndMissing = await post(JSON.stringify({ name: 'laptop', colour: 'blue' }));
  assert.equal(unknownAndMissing.status, 400);
  assert.deepEqual(
    unknownAndMissing.body,
    invalid('Invalid request body: machineId is required; colour is not allowed.', {
      fields: [
        { field: 'machineId', in: 'body', problem: 'is required' },
        { field: 'colour', in: 'body', problem: 'is not allowed' },
      ],
    }),
  );

  const pattern = await post(JSON.stringify({ machineId: 'has spaces' }));
  assert.equal(pattern.status, 400);
  assert.equal((pattern.body.fields as Array<{ field: string }>)[0]?.field, 'machineId');
});

test('a bad machine header is 400 naming the header', async () => {
  const response = await call(stack.gatewayUrl, `${SERVER_API}/identity`, {
    key: workspace.apiKey,
    headers: { 'x-herald-machine-id': 'no spaces allowed' },
  });
  assert.equal(response.status, 400);
  assert.deepEqual(
    response.body.fields,
    [{ field: 'x-herald-machine-id', in: 'header', problem: 'has characters outside A-Z a-z 0-9 . _ : -' }],
  );
});

test('bad input changed nothing', async () => {
  const response = await call(stack.gatewayUrl, machines, { key: workspace.apiKey });
  assert.equal(response.status, 200);
  assert.deepEqual(response.body, { machines: [] });
});

test('an unknown path is 404 not_found with the openapi link', async () => {
  const response = await call(stack.gatewayUrl, `${SERVER_API}/nothing-here?x=1`, { key: workspace.apiKey });
  assert.equal(response.status, 404);
  assert.deepEqual(response.body, {
    error: 'Not found',
    code: 'not_found',
    status: 404,
    message: `No endpoint at GET ${SERVER_API}/nothing-here.`,
    hint: 'See the OpenAPI description for every endpoint.',
    documentation: 'http://localhost:8080/docs/errors#not_found',
    openapi: 'http://localhost:8080/openapi.json',
  });
});

test('a known path with the wrong method is 405 with Allow and allowed', async () => {
  const response = await call(stack.gatewayUrl, `${SERVER_API}/identity`, { method: 'DELETE', key: workspace.apiKey });
  assert.equal(response.status, 405);
  assert.equal(response.headers.get('allow'), 'GET, HEAD');
  assert.deepEqual(response.body, {
    error: 'Method not allowed',
    code: 'method_not_allowed',
    status: 405,
    message: `DELETE is not allowed on ${SERVER_API}/identity.`,
    hint: 'Use one of the methods listed in `allowed`.',
    documentation: 'http://localhost:8080/docs/errors#method_not_allowed',
    allowed: ['GET', 'HEAD'],
  });
  const both = await call(stack.gatewayUrl, machines, { method: 'PUT', key: workspace.apiKey });
  assert.equal(both.headers.get('allow'), 'GET, HEAD, POST');
});

test("every response carries the server's own request id, never a supplied one", async () => {
  const response = await call(stack.gatewayUrl, `${SERVER_API}/identity`, { key: workspace.apiKey, headers: { 'x-request-id': 'trace-me-1' } });
  assert.match(response.headers.get('x-request-id') ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});
