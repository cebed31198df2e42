import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import type { PromiseClient } from '@herald/grpc';
import type { AudienceServiceClient, StreamTargetsRequest, StreamTargetsResponse, Targeting } from '@herald/proto/herald/audience/v1/audience';
import { SegmentFilter } from '@herald/proto/herald/audience/v1/segments';
import { connectDatabase } from '@herald/testkit';
import type pg from 'pg';

import { startAudience, type AudienceService } from './helpers.js';

// Sending targets: CountTargets and StreamTargets over 2,500 seeded subscribers, every targeting
// combination (segments included), batches, resumption; and ExpireSubscriptions.

const SIZE = 2_500;
let service: AudienceService;
let client: PromiseClient<AudienceServiceClient>;
let db: pg.Client;
const workspaceId = `ws_${randomUUID()}`;
const otherWorkspaceId = `ws_${randomUUID()}`;

/**
 * Subscriber n: tags "even" (n even) and "three" (n divisible by 3), external id user-(n mod 100),
 * inactive when n mod 10 = 0, its external id verified (an approver device) when n mod 7 = 0.
 */
interface Seeded {
  id: string;
  n: number;
  active: boolean;
  tags: string[];
  externalId: string;
}
let seeded: Seeded[];

before(async () => {
  service = await startAudience();
  client = service.client;
  db = await connectDatabase();
  // Volume is seeded in one statement; the ways in for single subscribers are tested elsewhere.
  const { rows } = await db.query<Seeded>(
    `INSERT INTO audience.subscribers (id, workspace_id, site_id, status, external_id, external_id_verified, tags, endpoint, p256dh, auth)
     SELECT 'sub_' || md5($1 || n), $1, 'site_t', CASE WHEN n % 10 = 0 THEN 'unsubscribed' ELSE 'active' END, 'user-' || (n % 100), n % 7 = 0,
            array_remove(ARRAY[CASE WHEN n % 2 = 0 THEN 'even' END, CASE WHEN n % 3 = 0 THEN 'three' END], NULL),
            'https://push.example/' || $1 || '/' || n, 'p256dh-' || n, 'auth-' || n
       FROM generate_series(1, $2::int) AS n
     RETURNING id, (regexp_match(endpoint, '/(\\d+)$'))[1]::int AS n, status = 'active' AS active, tags, external_id AS "externalId"`,
    [workspaceId, SIZE],
  );
  seeded = rows;
  // Another workspace's subscriber, which no targeting of this one may reach.
  await db.query(
    `INSERT INTO audience.subscribers (id, workspace_id, site_id, external_id, tags, endpoint, p256dh, auth)
     VALUES ($1, $2, 'site_o', 'user-1', '{even,three}', 'https://push.example/other', 'p', 'a')`,
    [`sub_other_${randomUUID()}`, otherWorkspaceId],
  );
});

after(async () => {
  await db.end();
  await service.stop();
});

const targeting = (partial: Partial<Targeting>): Targeting => ({ subscriberIds: [], externalIds: [], tags: [], segmentId: '', verifiedOnly: false, memberIds: [], ...partial });

async function stream(request: Partial<StreamTargetsRequest>): Promise<StreamTargetsResponse[]> {
  const batches: StreamTargetsResponse[] = [];
  for await (const batch of client.streamTargets({ workspaceId, targeting: undefined, batchSize: 0, after: '', withProfile: false, ...request })) batches.push(batch);
  return batches;
}

/** The ids of the seeded subscribers a targeting should reach, in the stream's (id) order. */
function expected(match: (subscriber: Seeded) => boolean): string[] {
  return seeded
    .filter((subscriber) => subscriber.active && match(subscriber))
    .map((subscriber) => subscriber.id)
    .sort();
}

function idsOf(batches: StreamTargetsResponse[]): string[] {
  return batches.flatMap((batch) => batch.targets.map((target) => target.subscriberId));
}

test('no targeting streams every active subscriber exactly once, in batches of 500 with cursors', async () => {
  const batches = await stream({});
  const all = expected(() => true);
  assert.equal(all.length, 2_250);
  assert.deepEqual(idsOf(batches), all);
  assert.deepEqual(
    batches.map((batch) => batch.targets.length),
    [500, 500, 500, 500, 250],
  );
  for (const batch of batches) assert.equal(batch.cursor, batch.targets.at(-1)?.subscriberId);
  const first = seeded.find((subscriber) => subscriber.id === all[0]) as Seeded;
  assert.deepEqual(batches[0]?.targets[0], {
    subscriberId: first.id,
    endpoint: `https://push.example/${workspaceId}/${first.n}`,
    p256dh: `p256dh-${first.n}`,
    auth: `auth-${first.n}`,
    // Without withProfile the profile is not read.
    externalId: '',
    customDataJson: '',
  });
  assert.deepEqual(await client.countTargets({ workspaceId, targeting: undefined }), { count: '2250' });
  // withProfile: each target also carries its external id and custom data (per-subscriber placeholders).
  await db.query(`UPDATE audience.subscribers SET custom_data = '{"firstName": "Ada"}' WHERE id = $1`, [first.id]);
  const [profiled] = await stream({ targeting: targeting({ subscriberIds: [first.id] }), withProfile: true });
  assert.deepEqual(profiled?.targets.map(({ externalId, customDataJson }) => ({ externalId, customData: JSON.parse(customDataJson) as unknown })), [
    { externalId: first.externalId, customData: { firstName: 'Ada' } },
  ]);
});

test('targeting: tags need every tag, ids are alternatives, kinds combine with AND', async () => {
  const cases: Array<[string, Targeting, (subscriber: Seeded) => boolean]> = [
    ['one tag', targeting({ tags: ['even'] }), (s) => s.n % 2 === 0],
    ['every tag', targeting({ tags: ['even', 'three'] }), (s) => s.n % 6 === 0],
    ['a tag nobody holds', targeting({ tags: ['even', 'nobody'] }), () => false],
    ['external ids', targeting({ externalIds: ['user-1', 'user-2'] }), (s) => s.n % 100 === 1 || s.n % 100 === 2],
    ['external ids and a tag', targeting({ externalIds: ['user-1', 'user-2'], tags: ['even'] }), (s) => s.n % 100 === 2],
    ['subscriber ids', targeting({ subscriberIds: seeded.filter((s) => s.n <= 20).map((s) => s.id) }), (s) => s.n <= 20],
    [
      'subscriber ids, external ids and tags',
      targeting({ subscriberIds: seeded.filter((s) => s.n <= 300).map((s) => s.id), externalIds: ['user-3', 'user-6', 'user-7'], tags: ['three'] }),
      (s) => s.n <= 300 && [3, 6, 7].includes(s.n % 100) && s.n % 3 === 0,
    ],
    // Questions: only approver devices, within whatever else the targeting says.
    ['verified only', targeting({ verifiedOnly: true }), (s) => s.n % 7 === 0],
    ['verified external ids', targeting({ verifiedOnly: true, externalIds: ['user-7', 'user-8'] }), (s) => s.n % 7 === 0 && [7, 8].includes(s.n % 100)],
    ['verified with a tag', targeting({ verifiedOnly: true, tags: ['even'] }), (s) => s.n % 14 === 0],
  ];
  for (const [name, filter, match] of cases) {
    const want = expected(match);
    assert.deepEqual(idsOf(await stream({ targeting: filter })), want, name);
    assert.deepEqual(await client.countTargets({ workspaceId, targeting: filter }), { count: String(want.length) }, name);
  }
  // Ids of inactive subscribers and of another workspace's are never targets.
  const inactive = seeded.find((subscriber) => !subscriber.active) as Seeded;
  const { rows } = await db.query<{ id: string }>(`SELECT id FROM audience.subscribers WHERE workspace_id = $1`, [otherWorkspaceId]);
  const foreign = targeting({ subscriberIds: [inactive.id, rows[0]?.id as string] });
  assert.deepEqual(await stream({ targeting: foreign }), []);
  assert.deepEqual(await client.countTargets({ workspaceId, targeting: foreign }), { count: '0' });
});

test('targeting by segment: its filter applies, ANDed with the other kinds; an unknown, foreign or deleted segment is NOT_FOUND', async () => {
  const segment = async (workspace: string, filter: Partial<SegmentFilter>): Promise<string> => {
    const { segment: created } = await service.segments.createSegment({ workspaceId: workspace, name: 'targets', filter: SegmentFilter.fromPartial(filter) });
    return created?.id as string;
  };
  // Even and not divisible by three; and separately, a status filter never widens a send past active subscribers.
  const evenNotThree = await segment(workspaceId, { tagsAll: ['even'], tagsNone: ['three'] });
  const anyStatus = await segment(workspaceId, { statuses: ['unsubscribed', 'active'], hasExternalId: true });
  const cases: Array<[string, Targeting, (subscriber: Seeded) => boolean]> = [
    ['a segment alone', targeting({ segmentId: evenNotThree }), (s) => s.n % 2 === 0 && s.n % 3 !== 0],
    ['a segment and external ids', targeting({ segmentId: evenNotThree, externalIds: ['user-2', 'user-3', 'user-4'] }), (s) => [2, 4].includes(s.n % 100) && s.n % 3 !== 0],
    ['a segment and a tag it excludes', targeting({ segmentId: evenNotThree, tags: ['three'] }), () => false],
    ['a segment allowing inactive states', targeting({ segmentId: anyStatus }), () => true],
  ];
  for (const [name, filter, match] of cases) {
    const want = expected(match);
    assert.deepEqual(idsOf(await stream({ targeting: filter, batchSize: 700 })), want, name);
    assert.deepEqual(await client.countTargets({ workspaceId, targeting: filter }), { count: String(want.length) }, name);
  }

  const foreign = await segment(otherWorkspaceId, {});
  const deleted = await segment(workspaceId, {});
  await service.segments.deleteSegment({ workspaceId, segmentId: deleted });
  for (const segmentId of ['seg_unknown', foreign, deleted]) {
    const message = `No segment ${segmentId}.`;
    await assert.rejects(client.countTargets({ workspaceId, targeting: targeting({ segmentId }) }), { code: 'not_found', message }, segmentId);
    await assert.rejects(stream({ targeting: targeting({ segmentId }) }), { code: 'not_found', message }, segmentId);
  }
});

test('batch_size is honoured up to 1,000, and a stream resumes after a cursor', async () => {
  assert.deepEqual(
    (await stream({ batchSize: 5_000 })).map((batch) => batch.targets.length),
    [1_000, 1_000, 250],
  );
  // Read one batch of 700, stop (cancelling the call), then resume after its cursor.
  let firstBatch: StreamTargetsResponse | undefined;
  for await (const batch of client.streamTargets({ workspaceId, targeting: undefined, batchSize: 700, after: '', withProfile: false })) {
    firstBatch = batch;
    break;
  }
  assert.equal(firstBatch?.targets.length, 700);
  const rest = await stream({ batchSize: 700, after: firstBatch?.cursor ?? '' });
  assert.deepEqual(
    rest.map((batch) => batch.targets.length),
    [700, 700, 150],
  );
  assert.deepEqual([...idsOf([firstBatch as StreamTargetsResponse]), ...idsOf(rest)], expected(() => true));
  // After the last cursor there is nothing.
  assert.deepEqual(await stream({ after: rest.at(-1)?.cursor ?? '' }), []);
});

test('ExpireSubscriptions changes active subscribers only, and they are no longer targets', async () => {
  const scratch = `ws_${randomUUID()}`;
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO audience.subscribers (id, workspace_id, site_id, status, endpoint, p256dh, auth)
     SELECT 'sub_' || md5($1 || n), $1, 'site_s', CASE WHEN n = 3 THEN 'unsubscribed' ELSE 'active' END, 'https://push.example/' || $1 || n, 'p', 'a'
       FROM generate_series(1, 4) AS n RETURNING id`,
    [scratch],
  );
  const ids = rows.map((row) => row.id);
  assert.deepEqual(await client.expireSubscriptions({ workspaceId: scratch, subscriberIds: [ids[0] as string, ids[2] as string, ids[0] as string], status: 'expired' }), {
    changed: 1,
  });
  assert.deepEqual(await client.expireSubscriptions({ workspaceId: scratch, subscriberIds: [ids[1] as string], status: 'bounced' }), { changed: 1 });
  // Another workspace cannot expire these.
  assert.deepEqual(await client.expireSubscriptions({ workspaceId, subscriberIds: [ids[3] as string], status: 'expired' }), { changed: 0 });
  await assert.rejects(client.expireSubscriptions({ workspaceId: scratch, subscriberIds: ids, status: 'unsubscribed' }), { code: 'invalid_request' });
  const statuses = await db.query<{ status: string; ended: boolean }>(
    `SELECT status, unsubscribed_at IS NOT NULL AS ended FROM audience.subscribers WHERE id = ANY($1) ORDER BY array_position($1, id)`,
    [ids],
  );
  assert.deepEqual(statuses.rows, [
    { status: 'expired', ended: true },
    { status: 'bounced', ended: true },
    { status: 'unsubscribed', ended: false },
    { status: 'active', ended: false },
  ]);
  assert.deepEqual(await client.countTargets({ workspaceId: scratch, targeting: undefined }), { count: '1' });
});
