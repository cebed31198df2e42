import { useInfiniteQuery, useQuery } from '@tanstack/react-query';
import type { Page, Subscriber, SubscriberStatus } from '@herald/sdk';
import { type FormEvent, useState } from 'react';

import { api } from '../api.js';
import { ErrorNote, splitList, Table, When } from '../ui.js';
import { subscriberCounts } from './overview.js';

/** Subscribers: search by external id, tags (all of them) and status, a page at a time. */

const PAGE_SIZE = 50;
const STATUSES: SubscriberStatus[] = ['active', 'unsubscribed', 'expired', 'bounced'];

interface Filters {
  externalId: string;
  tags: string;
  status: SubscriberStatus | '';
}

function queryString(filters: Filters, cursor: string | undefined): string {
  const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (filters.externalId.trim()) params.set('externalId', filters.externalId.trim());
  const tags = splitList(filters.tags);
  if (tags.length > 0) params.set('tags', tags.join(','));
  if (filters.status) params.set('status', filters.status);
  if (cursor) params.set('cursor', cursor);
  return params.toString();
}

export function SubscribersPage() {
  const [draft, setDraft] = useState<Filters>({ externalId: '', tags: '', status: '' });
  const [filters, setFilters] = useState<Filters>(draft);
  const counts = useQuery(subscriberCounts);
  const results = useInfiniteQuery({
    queryKey: ['subscribers', 'search', filters],
    queryFn: ({ pageParam }) => api<Page<Subscriber>>('GET', `/subscribers?${queryString(filters, pageParam)}`),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => (last.hasMore && last.nextCursor ? last.nextCursor : undefined),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setFilters(draft);
  };
  const rows = results.data?.pages.flatMap((page) => page.data) ?? [];

  return (
    <>
      {counts.data ? (
        <p>
          {counts.data.active} active of {counts.data.total} subscribers ({counts.data.unsubscribed} unsubscribed).
        </p>
      ) : null}
      <form className="inline" role="search" aria-label="Subscribers" onSubmit={submit}>
        <div className="fields">
          <div>
            <label htmlFor="search-external-id">External id</label>
            <input id="search-external-id" value={draft.externalId} onChange={(event) => setDraft({ ...draft, externalId: event.target.value })} />
          </div>
          <div>
            <label htmlFor="search-tags">Tags</label>
            <input id="search-tags" aria-describedby="search-tags-help" value={draft.tags} onChange={(event) => setDraft({ ...draft, tags: event.target.value })} />
            <p id="search-tags-help" className="help">
              Comma-separated; a subscriber must have them all.
            </p>
          </div>
          <div>
            <label htmlFor="search-status">Status</label>
            <select id="search-status" value={draft.status} onChange={(event) => setDraft({ ...draft, status: event.target.value as Filters['status'] })}>
              <option value="">Any</option>
              {STATUSES.map((status) => (
                <option key={status} value={status}>
                  {status}
                </option>
              ))}
            </select>
          </div>
        </div>
        <button type="submit">Search</button>
      </form>
      <ErrorNote error={counts.error ?? results.error} />
      {results.data && rows.length === 0 ? <p role="status">No subscriber matches.</p> : null}
      {rows.length > 0 ? (
        <Table caption="Subscribers found" columns={['Subscriber', 'External id', 'Status', 'Tags', 'Browser', 'OS', 'Subscribed']}>
          {rows.map((subscriber) => (
            <tr key={subscriber.id}>
              <th scope="row">
                <code>{subscriber.id}</code>
              </th>
              <td>{subscriber.externalId ? `${subscriber.externalId}${subscriber.externalIdVerified ? ' (verified)' : ''}` : '–'}</td>
              <td>{subscriber.status}</td>
              <td>{subscriber.tags.join(', ') || '–'}</td>
              <td>{subscriber.browser ?? '–'}</td>
              <td>{subscriber.os ?? '–'}</td>
              <td>
                <When at={subscriber.createdAt} />
              </td>
            </tr>
          ))}
        </Table>
      ) : null}
      {results.hasNextPage ? (
        <button type="button" className="secondary" disabled={results.isFetchingNextPage} onClick={() => void results.fetchNextPage()}>
          Show more
        </button>
      ) : null}
    </>
  );
}
