import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, connectDatabase, createKey, createWorkspace, pushSubscription, SERVER_API, startStack } from '@herald/testkit';
import type { ApiResponse, Stack, TestWorkspace } from '@herald/testkit';

// GET /subscribers (keyset pages, filters), /subscribers/count, GET, PATCH and DELETE
// /subscribers/{id}; tenant isolation and the key-origin scope.

let stack: Stack;
before(async () => {
  stack = await startStack({ gatewayEnv: { ALLOW_ANY_PUSH_SERVICE: 'true' } });
});
after(() => stack.stop());

interface SubscriberRecord {
  id: string;
  status: string;
  externalId: string | null;
  externalIdVerified: boolean;
  tags: string[];
  createdAt: string;
  updatedAt: string;
  [field: string]: unknown;
}

interface Page {
  data: SubscriberRecord[];
  hasMore: boolean;
  nextCursor: string | null;
}

const api = (workspace: TestWorkspace, path: string, options: { method?: string; body?: unknown } = {}) =>
  call(stack.gatewayUrl, `${SERVER_API}${path}`, { ...options, key: workspace.apiKey });

/** A browser subscribes through the SDK endpoint; returns the subscriber id. */
async function subscribe(workspace: TestWorkspace, fields: { externalId?: string; tags?: string[]; browser?: string } = {}): Promise<string> {
  const response = await call(stack.gatewayUrl, '/api/v1/subscribe', {
    method: 'POST',
    key: workspace.siteKey,
    headers: { origin: 'https://example.test' },
    body: { ...pushSubscription(), ...fields },
  });
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body.subscriberId as string;
}

async function list(workspace: TestWorkspace, query: string): Promise<ApiResponse<Page>> {
  return call<Page>(stack.gatewayUrl, `${SERVER_API}/subscribers${query}`, { key: workspace.apiKey });
}

function invalid(location: string, fields: Array<[string, string]>, summary = fields.map(([field, problem]) => `${field} ${problem}`).join('; ')) {
  return {
    error: 'Invalid request',
    code: 'invalid_request',
    status: 400,
    message: `Invalid ${location === 'body' ? 'request body' : location}: ${summary}.`,
    hint: 'Fix the request as the message says and send it again.',
    documentation: 'http://localhost:8080/docs/errors#invalid_request',
    fields: fields.map(([field, problem]) => ({ field, in: location, problem })),
  };
}

function notFound(id: string) {
  return {
    error: 'Not found',
    code: 'not_found',
    status: 404,
    message: `No subscriber ${id}.`,
    hint: 'Check the path and the identifier.',
    documentation: 'http://localhost:8080/docs/errors#not_found',
  };
}

test('pages are newest first and stable while subscribers are added between reads', async () => {
  const workspace = await createWorkspace('growth', 'example.test');
  const existing: string[] = [];
  for (let index = 0; index < 25; index += 1) existing.push(await subscribe(workspace, { externalId: `user-${index}` }));
  const newestFirst = [...existing].reverse();

  const seen: string[] = [];
  const added: string[] = [];
  let cursor: string | null = null;
  const shapes: Array<[number, boolean]> = [];
  do {
    // Each page is read while five more browsers subscribe.
    const [page, ...more]: [ApiResponse<Page>, ...string[]] = await Promise.all([
      list(workspace, `?limit=10${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`),
      ...Array.from({ length: 5 }, () => subscribe(workspace)),
    ]);
    assert.equal(page.status, 200);
    added.push(...more);
    shapes.push([page.body.data.length, page.body.hasMore]);
    seen.push(...page.body.data.map((subscriber) => subscriber.id));
    assert.equal(page.body.nextCursor === null, !page.body.hasMore);
    cursor = page.body.nextCursor;
  } while (cursor);

  // Every subscriber that existed at the first read, once each, newest first; at most the ones
  // added during the first read precede them.
  const firstAdded = seen.filter((id) => added.includes(id));
  assert.deepEqual(seen.slice(0, firstAdded.length), firstAdded);
  for (const id of firstAdded) assert.ok(added.indexOf(id) < 5, 'only rows added during the first read may appear');
  assert.deepEqual(
    seen.filter((id) => !added.includes(id)),
    newestFirst,
  );
  assert.equal(new Set(seen).size, seen.length);
  assert.deepEqual(shapes.at(-1)?.[1], false);

  // A fresh first page starts with the newest: the last ones added.
  const fresh = await list(workspace, '?limit=100');
  assert.equal(fresh.body.data.length, 25 + added.length);
  assert.deepEqual(
    fresh.body.data.slice(added.length).map((subscriber) => subscriber.id),
    newestFirst,
  );
  assert.equal(fresh.body.hasMore, false);
  assert.equal(fresh.body.nextCursor, null);
  const createdAt = fresh.body.data.map((subscriber) => Date.parse(subscriber.createdAt));
  assert.deepEqual(createdAt, [...createdAt].sort((a, b) => b - a));

  // The default page is 100; the list record carries exactly the spec's fields.
  const first = fresh.body.data.at(-1) as SubscriberRecord;
  assert.deepEqual(first, {
    id: existing[0],
    siteId: workspace.siteId,
    status: 'active',
    externalId: 'user-0',
    // Subscribed without a proof.
    externalIdVerified: false,
    tags: [],
    customData: {},
    browser: null,
    os: null,
    country: null,
    createdAt: first.createdAt,
    updatedAt: first.updatedAt,
  });
});

test('filters: status, every tag (AND), externalId, combined', async () => {
  const workspace = await createWorkspace('growth', 'example.test');
  const both = await subscribe(workspace, { tags: ['news', 'vip'], externalId: 'alice' });
  const news = await subscribe(workspace, { tags: ['news'], externalId: 'bob' });
  const vip = await subscribe(workspace, { tags: ['vip'], externalId: 'alice' });
  const gone = await subscribe(workspace, { tags: ['news', 'vip'], externalId: 'carol' });
  const db = await connectDatabase();
  try {
    await db.query(`UPDATE audience.subscribers SET status = 'expired' WHERE id = $1`, [gone]);
  } finally {
    await db.end();
  }
  const ids = async (query: string) => {
    const response = await list(workspace, query);
    assert.equal(response.status, 200, query);
    return response.body.data.map((subscriber) => subscriber.id);
  };
  assert.deepEqual(await ids(''), [gone, vip, news, both]);
  assert.deepEqual(await ids('?status=active'), [vip, news, both]);
  assert.deepEqual(await ids('?status=expired'), [gone]);
  assert.deepEqual(await ids('?status=unsubscribed'), []);
  assert.deepEqual(await ids('?tags=news'), [gone, news, both]);
  assert.deepEqual(await ids('?tags=news,vip'), [gone, both]);
  assert.deepEqual(await ids('?tags=vip,%20news'), [gone, both]);
  assert.deepEqual(await ids('?tags=news,vip,nobody'), []);
  assert.deepEqual(await ids('?externalId=alice'), [vip, both]);
  assert.deepEqual(await ids('?externalId=alice&tags=vip&status=active'), [vip, both]);
  assert.deepEqual(await ids('?externalId=carol&status=active'), []);
  // Filters page like the full list.
  const page = await list(workspace, '?tags=news&limit=2');
  assert.deepEqual(
    page.body.data.map((subscriber) => subscriber.id),
    [gone, news],
  );
  const next = await list(workspace, `?tags=news&limit=2&cursor=${encodeURIComponent(page.body.nextCursor as string)}`);
  assert.deepEqual(next.body, { data: [next.body.data[0]], hasMore: false, nextCursor: null });
  assert.equal(next.body.data[0]?.id, both);
});

test('bad list parameters are 400 naming the parameter', async () => {
  const workspace = await createWorkspace('growth', 'example.test');
  const cases: Array<[string, ReturnType<typeof invalid>]> = [
    ['?limit=0', invalid('querystring', [['limit', 'must be >= 1']])],
    ['?limit=101', invalid('querystring', [['limit', 'must be <= 100']])],
    ['?limit=ten', invalid('querystring', [['limit', 'must be integer']])],
    ['?status=gone', invalid('querystring', [['status', 'must be equal to one of the allowed values']])],
    ['?colour=blue', invalid('querystring', [['colour', 'is not allowed']])],
    ['?cursor=bm90IGEgY3Vyc29y', invalid('querystring', [['cursor', 'is not a cursor returned by this endpoint']])],
    ['?cursor=***', invalid('querystring', [['cursor', 'is not a cursor returned by this endpoint']])],
    [`?tags=${'x'.repeat(65)}`, invalid('querystring', [['tags', 'holds a tag that is not 1-64 characters without commas']])],
  ];
  for (const [query, body] of cases) {
    const response = await list(workspace, query);
    assert.equal(response.status, 400, query);
    assert.deepEqual(response.body, body, query);
  }
  // A real cursor with one character changed is refused too.
  await subscribe(workspace);
  await subscribe(workspace);
  const cursor = (await list(workspace, '?limit=1')).body.nextCursor as string;
  const tampered = `${cursor.slice(0, -2)}${cursor.at(-2) === 'A' ? 'B' : 'A'}${cursor.at(-1)}`;
  assert.equal((await list(workspace, `?limit=1&cursor=${tampered}`)).status, 400);
  assert.equal((await list(workspace, `?limit=1&cursor=${cursor}`)).status, 200);
});

test('count, read, update and delete one subscriber', async () => {
  const workspace = await createWorkspace('growth', 'example.test');
  const id = await subscribe(workspace, { externalId: 'dora', tags: ['news'], browser: 'Safari' });
  const other = await subscribe(workspace);
  const db = await connectDatabase();
  try {
    await db.query(`UPDATE audience.subscribers SET status = 'unsubscribed' WHERE id = $1`, [other]);
  } finally {
    await db.end();
  }
  const count = await api(workspace, '/subscribers/count');
  assert.equal(count.status, 200);
  assert.deepEqual(count.body, { total: 2, active: 1, unsubscribed: 1 });

  const read = await api(workspace, `/subscribers/${id}`);
  assert.equal(read.status, 200);
  const original = read.body as SubscriberRecord;
  assert.deepEqual(read.body, {
    id,
    siteId: workspace.siteId,
    status: 'active',
    externalId: 'dora',
    externalIdVerified: false,
    tags: ['news'],
    customData: {},
    browser: 'Safari',
    os: null,
    country: null,
    createdAt: original.createdAt,
    updatedAt: original.updatedAt,
    delivery: { pushService: 'https://127.0.0.1:9', reachable: true, unsubscribedAt: null },
    device: { browser: 'Safari', os: null, language: null, timezone: null },
  });

  // Each field on its own; the others stay.
  const tagged = await api(workspace, `/subscribers/${id}`, { method: 'PATCH', body: { tags: ['vip', 'beta', 'vip'] } });
  assert.equal(tagged.status, 200);
  assert.deepEqual(
    [tagged.body.tags, tagged.body.externalId, tagged.body.customData],
    [['vip', 'beta'], 'dora', {}],
  );
  assert.ok(Date.parse(tagged.body.updatedAt as string) >= Date.parse(original.updatedAt));
  assert.equal(tagged.body.createdAt, original.createdAt);
  const renamed = await api(workspace, `/subscribers/${id}`, { method: 'PATCH', body: { externalId: 'dora-2' } });
  assert.deepEqual([renamed.body.tags, renamed.body.externalId], [['vip', 'beta'], 'dora-2']);
  const data = { plan: 'pro', seats: 3, nested: { a: [1, 2] } };
  const described = await api(workspace, `/subscribers/${id}`, { method: 'PATCH', body: { customData: data } });
  assert.deepEqual([described.body.tags, described.body.externalId, described.body.customData], [['vip', 'beta'], 'dora-2', data]);
  // customData is replaced, not merged; externalId null clears it; an empty patch changes nothing.
  const replaced = await api(workspace, `/subscribers/${id}`, { method: 'PATCH', body: { customData: { only: true }, externalId: null, tags: [] } });
  assert.deepEqual([replaced.body.tags, replaced.body.externalId, replaced.body.customData], [[], null, { only: true }]);
  const unchanged = await api(workspace, `/subscribers/${id}`, { method: 'PATCH', body: {} });
  assert.deepEqual(unchanged.body, replaced.body);
  assert.deepEqual((await api(workspace, `/subscribers/${id}`)).body, replaced.body);

  // Delete: 204 without a body, then 404, and no longer counted.
  const deleted = await api(workspace, `/subscribers/${id}`, { method: 'DELETE' });
  assert.equal(deleted.status, 204);
  assert.equal(deleted.body, '');
  assert.deepEqual((await api(workspace, `/subscribers/${id}`)).body, notFound(id));
  assert.equal((await api(workspace, `/subscribers/${id}`, { method: 'DELETE' })).status, 404);
  assert.equal((await api(workspace, `/subscribers/${id}`, { method: 'PATCH', body: { tags: [] } })).status, 404);
  assert.deepEqual((await api(workspace, '/subscribers/count')).body, { total: 1, active: 0, unsubscribed: 1 });
});

test('bad updates are 400 naming the field', async () => {
  const workspace = await createWorkspace('growth', 'example.test');
  const id = await subscribe(workspace, { tags: ['keep'] });
  const cases: Array<[unknown, ReturnType<typeof invalid>]> = [
    [{ colour: 'blue' }, invalid('body', [['colour', 'is not allowed']])],
    [{ tags: 'news' }, invalid('body', [['tags', 'must be array']])],
    [{ tags: [1] }, invalid('body', [['tags.0', 'must be string']])],
    [{ tags: [''] }, invalid('body', [['tags.0', 'must NOT have fewer than 1 characters']])],
    [{ tags: ['x'.repeat(65)] }, invalid('body', [['tags.0', 'must NOT have more than 64 characters']])],
    [{ tags: ['a,b'] }, invalid('body', [['tags.0', 'must match pattern "^[^,]*$"']])],
    [{ tags: Array.from({ length: 51 }, (_, index) => `t${index}`) }, invalid('body', [['tags', 'must NOT have more than 50 items']])],
    [{ externalId: 5 }, invalid('body', [['externalId', 'must be string,null']])],
    [{ externalId: '' }, invalid('body', [['externalId', 'must NOT have fewer than 1 characters']])],
    [{ externalId: 'x'.repeat(257) }, invalid('body', [['externalId', 'must NOT have more than 256 characters']])],
    [{ customData: [1] }, invalid('body', [['customData', 'must be object']])],
    [{ customData: 'text' }, invalid('body', [['customData', 'must be object']])],
    [{ customData: { blob: 'x'.repeat(8_200) } }, invalid('body', [['customData', 'is larger than 8192 bytes serialized']])],
  ];
  for (const [body, expected] of cases) {
    const response = await api(workspace, `/subscribers/${id}`, { method: 'PATCH', body });
    assert.equal(response.status, 400, JSON.stringify(body).slice(0, 80));
    assert.deepEqual(response.body, expected, JSON.stringify(body).slice(0, 80));
  }
  const stored = await api(workspace, `/subscribers/${id}`);
  assert.deepEqual([stored.body.tags, stored.body.externalId, stored.body.customData], [['keep'], null, {}]);
});

test("another workspace's subscriber is 404 on every method, and its key needs the subscribers scope", async () => {
  const [mine, theirs] = [await createWorkspace('growth', 'example.test'), await createWorkspace('growth', 'example.test')];
  const id = await subscribe(theirs, { externalId: 'private' });
  assert.deepEqual((await api(mine, `/subscribers/${id}`)).body, notFound(id));
  assert.equal((await api(mine, `/subscribers/${id}`, { method: 'PATCH', body: { externalId: 'stolen' } })).status, 404);
  assert.equal((await api(mine, `/subscribers/${id}`, { method: 'DELETE' })).status, 404);
  assert.deepEqual((await list(mine, '')).body, { data: [], hasMore: false, nextCursor: null });
  assert.deepEqual((await api(mine, '/subscribers/count')).body, { total: 0, active: 0, unsubscribed: 0 });
  assert.equal((await api(theirs, `/subscribers/${id}`)).body.externalId, 'private');

  const runtime = await createKey(mine.workspaceId, 'runtime');
  for (const [method, path] of [
    ['GET', '/subscribers'],
    ['GET', '/subscribers/count'],
    ['GET', `/subscribers/${id}`],
    ['PATCH', `/subscribers/${id}`],
    ['DELETE', `/subscribers/${id}`],
  ] as const) {
    const response = await call(stack.gatewayUrl, `${SERVER_API}${path}`, { method, key: runtime.apiKey, ...(method === 'PATCH' ? { body: {} } : {}) });
    assert.equal(response.status, 403, `${method} ${path}`);
    assert.equal(response.body.message, 'This key cannot access this endpoint');
  }
  // The site key is for the browser endpoints only.
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/subscribers`, { key: mine.siteKey })).status, 401);
});
