import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, connectDatabase, createWorkspace, errorBody, pushSubscription, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';
import type pg from 'pg';

// /segments end to end: the gateway and the audience service (which owns segments and
// subscribers) on the real PostgreSQL; each test in a workspace of its own.

let stack: Stack;
let db: pg.Client;
before(async () => {
  [stack, db] = await Promise.all([startStack({ gatewayEnv: { ALLOW_ANY_PUSH_SERVICE: 'true' } }), connectDatabase()]);
});
after(async () => {
  await db.end();
  await stack.stop();
});

interface SegmentRecord {
  id: string;
  name: string;
  filter: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}
type Page = { data: SegmentRecord[]; hasMore: boolean; nextCursor: string | null };

const segments = (workspace: TestWorkspace, path = '', options: { method?: string; body?: unknown } = {}) =>
  call<SegmentRecord & Page & Record<string, unknown>>(stack.gatewayUrl, `${SERVER_API}/segments${path}`, { key: workspace.apiKey, ...options });

async function createSegment(workspace: TestWorkspace, filter: Record<string, unknown>, name = 'segment'): Promise<SegmentRecord> {
  const response = await segments(workspace, '', { method: 'POST', body: { name, filter } });
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body;
}

async function countOf(workspace: TestWorkspace, id: string): Promise<{ active: number; total: number }> {
  const response = await call<{ active: number; total: number }>(stack.gatewayUrl, `${SERVER_API}/segments/${id}/count`, { key: workspace.apiKey });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body;
}

interface Profile {
  externalId?: string;
  tags: string[];
  browser?: string;
  os?: string;
  country?: string;
  customData?: Record<string, unknown>;
  status?: 'unsubscribed' | 'expired';
  createdAt: string;
}

/**
 * Subscribers of `profiles`, made through the ways in that exist: the browser SDK's subscribe
 * (externalId, tags, browser, os), PATCH /subscribers (customData), the SDK's unsubscribe; the
 * country (a later geolocation's) and the subscription time are set in the table.
 */
async function seed(workspace: TestWorkspace, profiles: Profile[]): Promise<string[]> {
  const ids: string[] = [];
  for (const profile of profiles) {
    const subscription = pushSubscription();
    const fields = { ...(profile.externalId ? { externalId: profile.externalId } : {}), tags: profile.tags, ...(profile.browser ? { browser: profile.browser } : {}), ...(profile.os ? { os: profile.os } : {}) };
    const sdk = (path: string, body: unknown) => call(stack.gatewayUrl, `/api/v1/${path}`, { method: 'POST', key: workspace.siteKey, headers: { origin: 'https://example.test' }, body });
    const subscribed = await sdk('subscribe', { ...subscription, ...fields });
    assert.equal(subscribed.status, 201, JSON.stringify(subscribed.body));
    const id = subscribed.body.subscriberId as string;
    if (profile.customData) {
      const patched = await call(stack.gatewayUrl, `${SERVER_API}/subscribers/${id}`, { method: 'PATCH', key: workspace.apiKey, body: { customData: profile.customData } });
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
    }
    if (profile.status === 'unsubscribed') assert.equal((await sdk('unsubscribe', { endpoint: subscription.endpoint })).status, 200);
    const { rowCount } = await db.query(
      `UPDATE audience.subscribers SET country = $2, created_at = $3, status = CASE WHEN $4::text IS NULL THEN status ELSE $4 END WHERE workspace_id = $5 AND id = $1`,
      [id, profile.country ?? null, profile.createdAt, profile.status === 'expired' ? 'expired' : null, workspace.workspaceId],
    );
    assert.equal(rowCount, 1);
    ids.push(id);
  }
  return ids;
}

test('a segment is created (201), read, listed newest first in cursor pages, renamed, given a new filter and deleted (204)', async () => {
  const workspace = await createWorkspace();
  const created = await segments(workspace, '', {
    method: 'POST',
    body: { name: 'French VIPs', filter: { tags: { all: ['vip', 'vip'], none: ['churned'] }, country: ['FR'], createdAfter: '2026-01-01T01:00:00+01:00' } },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const segment = created.body;
  assert.match(segment.id, /^seg_[a-z2-7]{24}$/);
  // Lists hold each value once; instants come back in UTC.
  assert.deepEqual(segment, {
    id: segment.id,
    name: 'French VIPs',
    filter: { tags: { all: ['vip'], none: ['churned'] }, country: ['FR'], createdAfter: '2026-01-01T00:00:00.000Z' },
    createdAt: segment.createdAt,
    updatedAt: segment.createdAt,
  });
  assert.deepEqual((await segments(workspace, `/${segment.id}`)).body, segment);

  const second = await createSegment(workspace, {}, 'Everyone');
  assert.deepEqual(second.filter, {});
  const third = await createSegment(workspace, { hasExternalId: false }, 'Anonymous');
  const first = await segments(workspace, '?limit=2');
  assert.equal(first.status, 200);
  assert.deepEqual(first.body.data.map((item) => item.id), [third.id, second.id]);
  assert.equal(first.body.hasMore, true);
  assert.ok(first.body.nextCursor);
  const next = await segments(workspace, `?limit=2&cursor=${first.body.nextCursor}`);
  assert.deepEqual([next.body.data.map((item) => item.id), next.body.hasMore, next.body.nextCursor], [[segment.id], false, null]);

  const renamed = await segments(workspace, `/${segment.id}`, { method: 'PATCH', body: { name: 'VIPs in France' } });
  assert.equal(renamed.status, 200, JSON.stringify(renamed.body));
  assert.deepEqual({ ...renamed.body, updatedAt: segment.updatedAt }, { ...segment, name: 'VIPs in France' });
  assert.ok(Date.parse(renamed.body.updatedAt) > Date.parse(segment.updatedAt));
  // A filter sent replaces the whole filter.
  const refiltered = await segments(workspace, `/${segment.id}`, { method: 'PATCH', body: { filter: { os: ['Android'] } } });
  assert.deepEqual({ ...refiltered.body, updatedAt: segment.updatedAt }, { ...segment, name: 'VIPs in France', filter: { os: ['Android'] } });

  const deleted = await segments(workspace, `/${third.id}`, { method: 'DELETE' });
  assert.deepEqual([deleted.status, deleted.body], [204, '']);
  for (const path of [`/${third.id}`, `/${third.id}/count`]) assert.equal((await segments(workspace, path)).status, 404, path);
  assert.equal((await segments(workspace, `/${third.id}`, { method: 'DELETE' })).status, 404);
  assert.deepEqual((await segments(workspace)).body.data.map((item) => item.id), [second.id, segment.id]);
});

test('every filter dimension, alone and combined: the count is exact, active and in total, and follows the audience as it changes', async () => {
  const workspace = await createWorkspace();
  const profiles: Profile[] = [
    /* 0 */ { externalId: 'u0', tags: ['vip', 'news'], browser: 'Chrome 120', os: 'Windows 11', country: 'FR', customData: { plan: 'pro', beta: true }, createdAt: '2026-01-10T12:00:00Z' },
    /* 1 */ { tags: ['news'], browser: 'Firefox 128', os: 'Linux', country: 'DE', customData: { plan: 'free' }, createdAt: '2026-02-10T12:00:00Z' },
    /* 2 */ { externalId: 'u2', tags: ['sports'], browser: 'firefox', os: 'Mac OS X', country: 'FR', customData: { plan: 'pro', score: 3 }, createdAt: '2026-03-10T12:00:00Z' },
    /* 3 */ { externalId: 'u3', tags: ['vip', 'churned'], browser: 'Chromium 119', os: 'Windows 10', country: 'US', createdAt: '2026-04-10T12:00:00Z' },
    /* 4 */ { tags: ['news'], browser: 'Safari 17', os: 'iOS 17', customData: { plan: 'pro' }, status: 'unsubscribed', createdAt: '2026-05-10T12:00:00Z' },
    /* 5 */ { externalId: 'u5', tags: ['news', 'sports'], browser: 'Chrome', os: 'Android 14', country: 'FR', customData: { plan: 'pro', beta: false }, createdAt: '2026-06-10T12:00:00Z' },
    /* 6 */ { tags: ['vip'], country: 'DE', customData: { score: 3 }, status: 'expired', createdAt: '2026-07-10T12:00:00Z' },
  ];
  await seed(workspace, profiles);
  // Another workspace's look-alike subscriber is never counted.
  const other = await createWorkspace();
  await seed(other, [profiles[0] as Profile]);
  const active = (index: number): boolean => profiles[index]?.status === undefined;

  // Each filter with the subscribers (by index) it matches, whatever their status.
  const cases: Array<[Record<string, unknown>, number[]]> = [
    [{}, [0, 1, 2, 3, 4, 5, 6]],
    [{ tags: { all: ['vip'] } }, [0, 3, 6]],
    [{ tags: { all: ['vip', 'news'] } }, [0]],
    [{ tags: { any: ['sports', 'churned'] } }, [2, 3, 5]],
    [{ tags: { none: ['news'] } }, [2, 3, 6]],
    [{ tags: { all: ['news'], none: ['sports'] } }, [0, 1, 4]],
    [{ hasExternalId: true }, [0, 2, 3, 5]],
    [{ hasExternalId: false }, [1, 4, 6]],
    [{ status: ['unsubscribed', 'expired'] }, [4, 6]],
    [{ status: ['active'] }, [0, 1, 2, 3, 5]],
    // A name matches itself and its versions, whatever the case; Chromium is not Chrome.
    [{ browser: ['Chrome'] }, [0, 5]],
    [{ browser: ['FIREFOX'] }, [1, 2]],
    [{ browser: ['Firefox 128'] }, [1]],
    [{ browser: ['Safari', 'Chromium'] }, [3, 4]],
    [{ os: ['windows'] }, [0, 3]],
    [{ os: ['Mac OS'] }, [2]],
    [{ country: ['FR'] }, [0, 2, 5]],
    [{ country: ['DE', 'US'] }, [1, 3, 6]],
    [{ customData: { plan: 'pro' } }, [0, 2, 4, 5]],
    [{ customData: { plan: 'pro', beta: true } }, [0]],
    [{ customData: { beta: false } }, [5]],
    [{ customData: { score: 3 } }, [2, 6]],
    [{ customData: { score: '3' } }, []],
    // created_at in [createdAfter, createdBefore).
    [{ createdAfter: '2026-03-10T12:00:00Z' }, [2, 3, 4, 5, 6]],
    [{ createdBefore: '2026-03-10T12:00:00Z' }, [0, 1]],
    [{ createdAfter: '2026-02-01T00:00:00Z', createdBefore: '2026-05-01T00:00:00+02:00' }, [1, 2, 3]],
    [{ tags: { any: ['news', 'sports'] }, country: ['FR'], customData: { plan: 'pro' }, hasExternalId: true, browser: ['chrome'] }, [0, 5]],
    [{ tags: { any: ['news', 'sports'] }, country: ['FR'], customData: { plan: 'pro' }, hasExternalId: true, browser: ['chrome'], os: ['Android'] }, [5]],
    [{ tags: { all: ['nobody'] } }, []],
  ];
  for (const [filter, matching] of cases) {
    const { id } = await createSegment(workspace, filter);
    assert.deepEqual(await countOf(workspace, id), { active: matching.filter(active).length, total: matching.length }, JSON.stringify(filter));
  }

  // "Now": a new subscriber, a changed one and an unsubscribed one show in the next count.
  const { id: pro } = await createSegment(workspace, { customData: { plan: 'pro' } });
  assert.deepEqual(await countOf(workspace, pro), { active: 3, total: 4 });
  await seed(workspace, [{ tags: [], customData: { plan: 'pro' }, createdAt: '2026-08-01T00:00:00Z' }]);
  assert.deepEqual(await countOf(workspace, pro), { active: 4, total: 5 });
  assert.deepEqual(await countOf(other, (await createSegment(other, { customData: { plan: 'pro' } })).id), { active: 1, total: 1 });
});

test("another workspace's segment is 404 for every operation", async () => {
  const owner = await createWorkspace();
  const other = await createWorkspace();
  const { id } = await createSegment(owner, { tags: { all: ['vip'] } }, 'Mine');
  for (const [method, path, body] of [['GET', ''], ['GET', '/count'], ['PATCH', '', { name: 'taken' }], ['DELETE', '']] as const) {
    const response = await segments(other, `/${id}${path}`, { method, body });
    assert.deepEqual(response.body, errorBody('not_found', 404, 'Not found', `No segment ${id}.`, 'Check the path and the identifier.'), `${method} ${path}`);
  }
  assert.deepEqual((await segments(other)).body, { data: [], hasMore: false, nextCursor: null });
  assert.equal((await segments(owner, `/${id}`)).body.name, 'Mine');
});

test('validation: every bad field is a 400 naming it', async () => {
  const workspace = await createWorkspace();
  const fieldsOf = (response: { status: number; body: Record<string, unknown> }) => {
    assert.equal(response.status, 400, JSON.stringify(response.body));
    assert.equal(response.body.code, 'invalid_request');
    return (response.body.fields as Array<{ field: string }>).map((item) => item.field).sort();
  };
  const create = async (body: unknown) => fieldsOf(await segments(workspace, '', { method: 'POST', body }));
  const withFilter = (filter: unknown) => create({ name: 'x', filter });
  const many = (count: number, make: (index: number) => string) => Array.from({ length: count }, (_, index) => make(index));

  assert.deepEqual(await create({}), ['filter', 'name']);
  assert.deepEqual(await create({ name: '', filter: {}, extra: 1 }), ['extra', 'name']);
  assert.deepEqual(await create({ name: 'n'.repeat(201), filter: {} }), ['name']);
  assert.deepEqual(await withFilter({ segment: 'x' }), ['filter.segment']);
  assert.deepEqual(await withFilter({ tags: { all: many(21, (i) => `t${i}`) } }), ['filter.tags.all']);
  assert.deepEqual(await withFilter({ tags: { any: ['a,b'], none: ['t'.repeat(65)], some: [] } }), ['filter.tags.any.0', 'filter.tags.none.0', 'filter.tags.some']);
  assert.deepEqual(await withFilter({ hasExternalId: 'yes' }), ['filter.hasExternalId']);
  assert.deepEqual(await withFilter({ status: ['gone'] }), ['filter.status.0']);
  assert.deepEqual(await withFilter({ browser: [''], os: many(21, (i) => `os${i}`) }), ['filter.browser.0', 'filter.os']);
  assert.deepEqual(await withFilter({ browser: ['b'.repeat(101)] }), ['filter.browser.0']);
  assert.deepEqual(await withFilter({ country: ['fr', 'FRA'] }), ['filter.country.0', 'filter.country.1']);
  assert.deepEqual(await withFilter({ customData: Object.fromEntries(many(11, (i) => `k${i}`).map((key) => [key, 1])) }), ['filter.customData']);
  assert.deepEqual(await withFilter({ customData: { nested: { a: 1 }, list: [1], nothing: null, long: 'v'.repeat(257) } }), [
    'filter.customData.list',
    'filter.customData.long',
    'filter.customData.nested',
    'filter.customData.nothing',
  ]);
  assert.deepEqual(await withFilter({ customData: { ['k'.repeat(65)]: 1 } }), ['filter.customData']);
  assert.deepEqual(await withFilter({ createdAfter: 'yesterday', createdBefore: '2026-01-01' }), ['filter.createdAfter', 'filter.createdBefore']);
  // Shaped like an instant, but no such day: the audience service says so.
  const noSuchDay = await segments(workspace, '', { method: 'POST', body: { name: 'x', filter: { createdAfter: '2026-02-30T00:00:00Z' } } });
  assert.deepEqual(fieldsOf(noSuchDay), ['filter.createdAfter']);
  assert.equal(noSuchDay.body.message, 'Invalid request body: filter.createdAfter is not an ISO 8601 date-time.');
  const backwards = await segments(workspace, '', { method: 'POST', body: { name: 'x', filter: { createdAfter: '2026-03-01T00:00:00Z', createdBefore: '2026-03-01T00:00:00Z' } } });
  assert.deepEqual(fieldsOf(backwards), ['filter.createdBefore']);
  assert.equal(backwards.body.message, 'Invalid request body: filter.createdBefore must be later than filter.createdAfter.');
  assert.deepEqual(await create({ name: '   ', filter: {} }), ['name']);

  const { id } = await createSegment(workspace, {});
  assert.deepEqual(fieldsOf(await segments(workspace, `/${id}`, { method: 'PATCH', body: {} })), ['(body)']);
  assert.deepEqual(fieldsOf(await segments(workspace, `/${id}`, { method: 'PATCH', body: { filter: { country: ['xx'] } } })), ['filter.country.0']);
  assert.deepEqual(fieldsOf(await segments(workspace, '?cursor=not-a-cursor')), ['cursor']);
  assert.deepEqual(fieldsOf(await segments(workspace, '?limit=101')), ['limit']);
  // Nothing invalid was stored.
  assert.deepEqual((await segments(workspace)).body.data.map((item) => item.id), [id]);
});
