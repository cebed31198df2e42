import { invalidFields } from '@herald/errors';

/**
 * Opaque cursors of newest-first pages: the position of the last row shown, as (creation time in
 * microseconds, id). A store selects rows strictly after it in (created_at DESC, id DESC) order.
 */

export interface PagePosition {
  /** created_at in microseconds since the epoch, as text (exact beyond 2^53). */
  createdUs: string;
  id: string;
}

const positionPattern = /^v1:(\d{1,17}):([A-Za-z0-9_.:-]{1,128})$/;

/** SQL for a row's `createdUs` (its created_at in microseconds, as text). */
export const CREATED_US_SQL = `(extract(epoch FROM created_at) * 1000000)::bigint::text`;

export function encodeCursor({ createdUs, id }: PagePosition): string {
  return Buffer.from(`v1:${createdUs}:${id}`).toString('base64url');
}

/** The position a cursor of encodeCursor names; undefined for anything else. */
export function decodeCursor(cursor: string): PagePosition | undefined {
  const match = /^[A-Za-z0-9_-]{1,400}$/.test(cursor) ? positionPattern.exec(Buffer.from(cursor, 'base64url').toString('utf8')) : null;
  // Re-encoding must give the cursor back: base64url decoding alone forgives stray characters.
  if (!match?.[1] || !match[2] || Buffer.from(match[0]).toString('base64url') !== cursor) return undefined;
  return { createdUs: match[1], id: match[2] };
}

const DEFAULT_PAGE = 100;
const MAX_PAGE = 100;

/**
 * Reads a newest-first page request (/templates, /campaigns, /segments: the shared `limit` rules
 * and opaque cursors) and returns what to fetch: `fetch` rows after `after` (one more than shown
 * tells whether there is a next page), and `page` to cut the fetched rows into the answer. A
 * cursor this module did not make is a 400 naming `cursor`.
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
