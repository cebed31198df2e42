import { pageRequest, type Pool, type Queryable } from '@herald/db';
import { COUNTRY_CODE_PATTERN, INSTANT_PATTERN, randomId, SEGMENT_LIMITS, SUBSCRIBER_LIMITS, SUBSCRIBER_STATUSES } from '@herald/domain';
import { HeraldError, invalidFields, type FieldProblem } from '@herald/errors';
import { implementService } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import { SegmentFilter, SegmentServiceService, type Segment } from '@herald/proto/herald/audience/v1/segments';

import * as store from './store.js';

/**
 * /segments: saved audiences, a named filter over what subscribers hold, in newest-first pages of
 * a workspace's own. Campaigns name one in their targeting (CountTargets, StreamTargets).
 */

const countryCode = new RegExp(COUNTRY_CODE_PATTERN);
const instant = new RegExp(INSTANT_PATTERN);

const notFound = (id: string): HeraldError => new HeraldError('not_found', `No segment ${id}.`, { title: 'Not found' });

function toSegment(row: store.SegmentRow): Segment {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    filter: SegmentFilter.fromJSON(row.filter),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** Each value once, in the order first given; a problem when there are too many or one is malformed. */
function checkList(values: string[], field: string, max: number, problems: FieldProblem[], valid: (value: string) => string | undefined): string[] {
  const unique = [...new Set(values)];
  if (unique.length > max) problems.push({ field, in: 'body', problem: `holds more than ${max} values` });
  const problem = unique.map(valid).find((found) => found !== undefined);
  if (problem) problems.push({ field, in: 'body', problem });
  return unique;
}

const tagProblem = (tag: string): string | undefined =>
  tag.length === 0 || tag.length > SUBSCRIBER_LIMITS.tagLength || tag.includes(',') ? `holds a tag that is not 1-${SUBSCRIBER_LIMITS.tagLength} characters without commas` : undefined;
const statusProblem = (status: string): string | undefined =>
  (SUBSCRIBER_STATUSES as readonly string[]).includes(status) ? undefined : `holds a status that is not one of ${SUBSCRIBER_STATUSES.join(', ')}`;
const deviceProblem = (name: string): string | undefined =>
  name.length === 0 || name.length > SUBSCRIBER_LIMITS.deviceFieldLength ? `holds a value that is not 1-${SUBSCRIBER_LIMITS.deviceFieldLength} characters` : undefined;
const countryProblem = (code: string): string | undefined => (countryCode.test(code) ? undefined : 'holds a value that is not an ISO 3166-1 alpha-2 code in upper case');

/** customData to compare: a JSON object of at most a few scalar values; re-serialized. */
function checkCustomData(json: string, problems: FieldProblem[]): string {
  if (json === '') return '';
  const fail = (problem: string): string => {
    problems.push({ field: 'filter.customData', in: 'body', problem });
    return '';
  };
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return fail('is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail('is not an object');
  const entries = Object.entries(value);
  if (entries.length > SEGMENT_LIMITS.customDataKeys) return fail(`holds more than ${SEGMENT_LIMITS.customDataKeys} keys`);
  for (const [key, item] of entries) {
    if (key.length === 0 || key.length > SEGMENT_LIMITS.customDataKeyLength) return fail(`holds a key that is not 1-${SEGMENT_LIMITS.customDataKeyLength} characters`);
    const scalar = typeof item === 'number' || typeof item === 'boolean' || (typeof item === 'string' && item.length <= SEGMENT_LIMITS.customDataValueLength);
    if (!scalar) return fail(`.${key} is not a number, a boolean or a string of at most ${SEGMENT_LIMITS.customDataValueLength} characters`);
  }
  return entries.length === 0 ? '' : JSON.stringify(value);
}

/** An RFC 3339 instant, normalized; '' stays unset. */
function checkInstant(value: string, field: string, problems: FieldProblem[]): string {
  if (value === '') return '';
  const time = instant.test(value) ? Date.parse(value) : Number.NaN;
  // Date.parse rolls a day past the month's end over (2026-02-30 is March 2nd): refuse it instead.
  const [year, month, day] = value.slice(0, 10).split('-').map(Number) as [number, number, number];
  if (Number.isNaN(time) || new Date(Date.UTC(year, month - 1, day)).getUTCDate() !== day) {
    problems.push({ field, in: 'body', problem: 'is not an ISO 8601 date-time' });
    return '';
  }
  return new Date(time).toISOString();
}

/** The filter as stored: values checked and normalized; every problem in one 400 naming its field. */
export function checkFilter(filter: SegmentFilter): SegmentFilter {
  const problems: FieldProblem[] = [];
  const tags = (values: string[], field: string) => checkList(values, field, SEGMENT_LIMITS.tagsPerList, problems, tagProblem);
  const values = (list: string[], field: string, valid: (value: string) => string | undefined) => checkList(list, field, SEGMENT_LIMITS.valuesPerList, problems, valid);
  const checked: SegmentFilter = {
    tagsAll: tags(filter.tagsAll, 'filter.tags.all'),
    tagsAny: tags(filter.tagsAny, 'filter.tags.any'),
    tagsNone: tags(filter.tagsNone, 'filter.tags.none'),
    ...(filter.hasExternalId !== undefined ? { hasExternalId: filter.hasExternalId } : {}),
    statuses: values(filter.statuses, 'filter.status', statusProblem),
    browsers: values(filter.browsers, 'filter.browser', deviceProblem),
    oses: values(filter.oses, 'filter.os', deviceProblem),
    countries: values(filter.countries, 'filter.country', countryProblem),
    customDataJson: checkCustomData(filter.customDataJson, problems),
    createdAfter: checkInstant(filter.createdAfter, 'filter.createdAfter', problems),
    createdBefore: checkInstant(filter.createdBefore, 'filter.createdBefore', problems),
  };
  if (checked.createdAfter && checked.createdBefore && Date.parse(checked.createdAfter) >= Date.parse(checked.createdBefore)) {
    problems.push({ field: 'filter.createdBefore', in: 'body', problem: 'must be later than filter.createdAfter' });
  }
  if (problems.length > 0) throw invalidFields('body', problems);
  return checked;
}

function checkName(name: string): string {
  if (name.trim().length === 0 || name.length > SEGMENT_LIMITS.nameLength) {
    throw invalidFields('body', [{ field: 'name', in: 'body', problem: `is not 1-${SEGMENT_LIMITS.nameLength} characters` }]);
  }
  return name;
}

/** The filter of a workspace's segment; NOT_FOUND for an unknown one (another workspace's, or deleted). */
export async function segmentFilter(db: Queryable, workspaceId: string, segmentId: string): Promise<SegmentFilter> {
  const row = await store.findSegment(db, workspaceId, segmentId);
  if (!row) throw notFound(segmentId);
  return SegmentFilter.fromJSON(row.filter);
}

export function segmentHandlers(pool: Pool, logger: Logger) {
  return implementService(
    SegmentServiceService,
    {
      async listSegments({ workspaceId, limit, cursor }) {
        const request = pageRequest(limit, cursor);
        const { rows, nextCursor } = request.page(await store.listSegments(pool, workspaceId, request.after, request.fetch));
        return { segments: rows.map(toSegment), nextCursor };
      },

      async createSegment({ workspaceId, name, filter }) {
        const checked = checkFilter(filter ?? SegmentFilter.fromPartial({}));
        const row = await store.insertSegment(pool, `seg_${randomId(24)}`, workspaceId, checkName(name), SegmentFilter.toJSON(checked));
        logger.info({ workspaceId, segmentId: row.id }, 'segment created');
        return { segment: toSegment(row) };
      },

      async getSegment({ workspaceId, segmentId }) {
        const row = await store.findSegment(pool, workspaceId, segmentId);
        if (!row) throw notFound(segmentId);
        return { segment: toSegment(row) };
      },

      async updateSegment({ workspaceId, segmentId, name, filter }) {
        const changes = {
          ...(name !== undefined ? { name: checkName(name) } : {}),
          ...(filter !== undefined ? { filter: SegmentFilter.toJSON(checkFilter(filter)) } : {}),
        };
        const row = Object.keys(changes).length === 0 ? await store.findSegment(pool, workspaceId, segmentId) : await store.updateSegment(pool, workspaceId, segmentId, changes);
        if (!row) throw notFound(segmentId);
        return { segment: toSegment(row) };
      },

      async deleteSegment({ workspaceId, segmentId }) {
        if (!(await store.deleteSegment(pool, workspaceId, segmentId))) throw notFound(segmentId);
        logger.info({ workspaceId, segmentId }, 'segment deleted');
        return {};
      },

      async countSegment({ workspaceId, segmentId }) {
        return store.countSegment(pool, workspaceId, await segmentFilter(pool, workspaceId, segmentId));
      },
    },
    logger,
  );
}
