import { decodeCursor, encodeCursor, type PagePosition } from '@herald/db';
import { invalidFields } from '@herald/errors';

/** Newest-first pages (/templates, /campaigns): the shared `limit` rules and opaque cursors. */

const DEFAULT_PAGE = 100;
const MAX_PAGE = 100;

/**
 * Reads a page request and returns what to fetch: `fetch` rows after `after` (one more than shown
 * tells whether there is a next page), and `page` to cut the fetched rows into the answer.
 */
export function pageRequest(limit: number, cursor: string) {
  const size = limit <= 0 ? DEFAULT_PAGE : Math.min(limit, MAX_PAGE);
  const after: PagePosition | undefined = cursor ? decodeCursor(cursor) : undefined;
  if (cursor && !after) throw invalidFields('querystring', [{ field: 'cursor', in: 'querystring', problem: 'is not a cursor returned by this endpoint' }]);
  return {
    after,
    fetch: size + 1,
    page<Row extends { id: string; created_us: string }>(rows: Row[]): { rows: Row[]; nextCursor: string } {
      const shown = rows.slice(0, size);
      const last = shown.at(-1);
      return { rows: shown, nextCursor: rows.length > size && last ? encodeCursor({ createdUs: last.created_us, id: last.id }) : '' };
    },
  };
}
