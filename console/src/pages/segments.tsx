import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { CreateSegmentRequest, Page, Segment, SegmentCount, SegmentFilter } from '@herald/sdk';
import { type FormEvent, useState } from 'react';

import { api } from '../api.js';
import { useCan } from '../session.js';
import { ErrorNote, splitList, Table, When } from '../ui.js';

/**
 * Segments with a live count: each row asks GET /segments/{id}/count again every 15 s while the
 * page is open. A segment by tags can be made here (the API takes every other dimension too).
 */

const SEGMENTS = ['segments'] as const;
const LIVE_MS = 15_000;

/** The filter in words: "tags all of vip, beta; status active". */
function describeFilter(filter: SegmentFilter): string {
  const parts: string[] = [];
  if (filter.tags?.all?.length) parts.push(`tags all of ${filter.tags.all.join(', ')}`);
  if (filter.tags?.any?.length) parts.push(`tags any of ${filter.tags.any.join(', ')}`);
  if (filter.tags?.none?.length) parts.push(`tags none of ${filter.tags.none.join(', ')}`);
  if (filter.status?.length) parts.push(`status ${filter.status.join(' or ')}`);
  if (filter.browser?.length) parts.push(`browser ${filter.browser.join(' or ')}`);
  if (filter.os?.length) parts.push(`OS ${filter.os.join(' or ')}`);
  if (filter.country?.length) parts.push(`country ${filter.country.join(' or ')}`);
  if (filter.hasExternalId !== undefined) parts.push(filter.hasExternalId ? 'with an external id' : 'without an external id');
  if (filter.customData && Object.keys(filter.customData).length > 0) parts.push(`custom data ${Object.entries(filter.customData).map(([key, value]) => `${key}=${String(value)}`).join(', ')}`);
  if (filter.createdAfter) parts.push(`subscribed after ${filter.createdAfter}`);
  if (filter.createdBefore) parts.push(`subscribed before ${filter.createdBefore}`);
  return parts.length > 0 ? parts.join('; ') : 'every subscriber';
}

export function SegmentsPage() {
  const can = useCan();
  const segments = useQuery({ queryKey: SEGMENTS, queryFn: () => api<Page<Segment>>('GET', '/segments?limit=100') });
  return (
    <>
      {can('subscribers', 'POST') ? <CreateSegmentForm /> : null}
      <ErrorNote error={segments.error} />
      {segments.data && segments.data.data.length === 0 ? <p>No segment yet.</p> : null}
      {segments.data && segments.data.data.length > 0 ? (
        <Table caption="Segments" columns={['Segment', 'Who', 'Active now', 'All matching', 'Updated']}>
          {segments.data.data.map((segment) => (
            <SegmentRow key={segment.id} segment={segment} />
          ))}
        </Table>
      ) : null}
    </>
  );
}

function SegmentRow({ segment }: { segment: Segment }) {
  const count = useQuery({
    queryKey: [...SEGMENTS, segment.id, 'count'],
    queryFn: () => api<SegmentCount>('GET', `/segments/${encodeURIComponent(segment.id)}/count`),
    refetchInterval: LIVE_MS,
  });
  const shown = (value: number | undefined) => (count.error ? 'Unavailable' : (value ?? '…'));
  return (
    <tr>
      <th scope="row">{segment.name}</th>
      <td>{describeFilter(segment.filter)}</td>
      <td>{shown(count.data?.active)}</td>
      <td>{shown(count.data?.total)}</td>
      <td>
        <When at={segment.updatedAt} />
      </td>
    </tr>
  );
}

function CreateSegmentForm() {
  const queryClient = useQueryClient();
  const [name, setName] = useState('');
  const [tags, setTags] = useState('');
  const create = useMutation({
    mutationFn: (body: CreateSegmentRequest) => api<Segment>('POST', '/segments', body),
    onSuccess: () => {
      setName('');
      setTags('');
      void queryClient.invalidateQueries({ queryKey: SEGMENTS });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const all = splitList(tags);
    create.mutate({ name, filter: all.length > 0 ? { tags: { all } } : {} });
  };
  return (
    <form className="inline" onSubmit={submit} aria-labelledby="new-segment">
      <h2 id="new-segment">New segment</h2>
      <div className="fields">
        <div>
          <label htmlFor="segment-name">Name</label>
          <input id="segment-name" required value={name} onChange={(event) => setName(event.target.value)} />
        </div>
        <div>
          <label htmlFor="segment-tags">Subscribers with all of these tags</label>
          <input id="segment-tags" aria-describedby="segment-tags-help" value={tags} onChange={(event) => setTags(event.target.value)} />
          <p id="segment-tags-help" className="help">
            Comma-separated; empty: every subscriber.
          </p>
        </div>
      </div>
      <ErrorNote error={create.error} />
      <button type="submit" disabled={create.isPending}>
        Create segment
      </button>
    </form>
  );
}
