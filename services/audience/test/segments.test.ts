import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import { HeraldError } from '@herald/errors';
import { SegmentFilter } from '@herald/proto/herald/audience/v1/segments';

import { startAudience, type AudienceService } from './helpers.js';

// The SegmentService's own checks, for gRPC callers that skip the gateway's schema: every filter
// problem is an invalid_request naming its field (all of them in one answer), values are stored
// normalized, and a segment is only ever its own workspace's.

let service: AudienceService;
before(async () => {
  service = await startAudience();
});
after(() => service.stop());

const filter = (partial: Partial<SegmentFilter>): SegmentFilter => SegmentFilter.fromPartial(partial);

/** The fields an invalid_request names, in order. */
async function problems(call: Promise<unknown>): Promise<Array<[string, string]>> {
  const err = await call.then(
    () => assert.fail('expected invalid_request'),
    (caught: unknown) => caught,
  );
  assert.ok(err instanceof HeraldError, String(err));
  assert.equal(err.code, 'invalid_request');
  return (err.extra.fields as Array<{ field: string; problem: string }>).map(({ field, problem }) => [field, problem]);
}

test('every problem of a filter is named at once, with its field', async () => {
  const workspaceId = `ws_${randomUUID()}`;
  const bad = filter({
    tagsAll: Array.from({ length: 21 }, (_, index) => `t${index}`),
    tagsAny: ['a,b'],
    tagsNone: [''],
    statuses: ['gone'],
    browsers: ['b'.repeat(101)],
    oses: [''],
    countries: ['fr'],
    customDataJson: '{"nested": {"a": 1}}',
    createdAfter: '2026-02-30T00:00:00Z',
    createdBefore: 'tomorrow',
  });
  assert.deepEqual(await problems(service.segments.createSegment({ workspaceId, name: 'bad', filter: bad })), [
    ['filter.tags.all', 'holds more than 20 values'],
    ['filter.tags.any', 'holds a tag that is not 1-64 characters without commas'],
    ['filter.tags.none', 'holds a tag that is not 1-64 characters without commas'],
    ['filter.status', 'holds a status that is not one of active, unsubscribed, expired, bounced'],
    ['filter.browser', 'holds a value that is not 1-100 characters'],
    ['filter.os', 'holds a value that is not 1-100 characters'],
    ['filter.country', 'holds a value that is not an ISO 3166-1 alpha-2 code in upper case'],
    ['filter.customData', '.nested is not a number, a boolean or a string of at most 256 characters'],
    ['filter.createdAfter', 'is not an ISO 8601 date-time'],
    ['filter.createdBefore', 'is not an ISO 8601 date-time'],
  ]);
  const customData = async (json: string) => problems(service.segments.createSegment({ workspaceId, name: 'bad', filter: filter({ customDataJson: json }) }));
  assert.deepEqual(await customData('not json'), [['filter.customData', 'is not JSON']]);
  assert.deepEqual(await customData('[1]'), [['filter.customData', 'is not an object']]);
  assert.deepEqual(await customData(JSON.stringify(Object.fromEntries(Array.from({ length: 11 }, (_, index) => [`k${index}`, index])))), [['filter.customData', 'holds more than 10 keys']]);
  assert.deepEqual(await customData(JSON.stringify({ ['k'.repeat(65)]: 1 })), [['filter.customData', 'holds a key that is not 1-64 characters']]);
  assert.deepEqual(await problems(service.segments.createSegment({ workspaceId, name: ' ', filter: filter({}) })), [['name', 'is not 1-200 characters']]);
  assert.deepEqual(await problems(service.segments.listSegments({ workspaceId, limit: 10, cursor: 'bm90LWEtY3Vyc29y' })), [['cursor', 'is not a cursor returned by this endpoint']]);
  // Nothing was stored.
  assert.deepEqual(await service.segments.listSegments({ workspaceId, limit: 0, cursor: '' }), { segments: [], nextCursor: '' });
});

test('a filter is stored normalized: lists once each, customData re-serialized, instants in UTC', async () => {
  const workspaceId = `ws_${randomUUID()}`;
  const { segment } = await service.segments.createSegment({
    workspaceId,
    name: 'normalized',
    filter: filter({
      tagsAll: ['vip', 'vip'],
      hasExternalId: false,
      countries: ['FR', 'FR', 'DE'],
      customDataJson: '{ "plan" : "pro" }',
      createdAfter: '2026-03-01T01:00:00+01:00',
    }),
  });
  assert.deepEqual(segment?.filter, filter({ tagsAll: ['vip'], hasExternalId: false, countries: ['FR', 'DE'], customDataJson: '{"plan":"pro"}', createdAfter: '2026-03-01T00:00:00.000Z' }));
  // An empty customData object filters nothing.
  const { segment: empty } = await service.segments.updateSegment({ workspaceId, segmentId: segment?.id ?? '', filter: filter({ customDataJson: '{}' }) });
  assert.deepEqual(empty?.filter, filter({}));
});

test("a segment is only its workspace's: another's is NOT_FOUND for read, change, delete and count", async () => {
  const owner = `ws_${randomUUID()}`;
  const other = `ws_${randomUUID()}`;
  const { segment } = await service.segments.createSegment({ workspaceId: owner, name: 'mine', filter: filter({}) });
  const segmentId = segment?.id ?? '';
  const notFound = { code: 'not_found', message: `No segment ${segmentId}.` };
  await assert.rejects(service.segments.getSegment({ workspaceId: other, segmentId }), notFound);
  await assert.rejects(service.segments.updateSegment({ workspaceId: other, segmentId, name: 'taken' }), notFound);
  await assert.rejects(service.segments.updateSegment({ workspaceId: other, segmentId }), notFound);
  await assert.rejects(service.segments.countSegment({ workspaceId: other, segmentId }), notFound);
  await assert.rejects(service.segments.deleteSegment({ workspaceId: other, segmentId }), notFound);
  assert.equal((await service.segments.getSegment({ workspaceId: owner, segmentId })).segment?.name, 'mine');
  assert.deepEqual(await service.segments.countSegment({ workspaceId: owner, segmentId }), { active: '0', total: '0' });
});
