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

/**
 * One newest-first page of at most `pageSize` rows: `read` is asked for one row more than shown,
 * which tells whether another page follows; `nextCursor` names the last row shown then, else ''.
 */
export async function newestFirstPage<Row extends { created_us: string; id: string }>(
  pageSize: number,
  read: (limit: number) => Promise<Row[]>,
): Promise<{ rows: Row[]; nextCursor: string }> {
  const rows = await read(pageSize + 1);
  const page = rows.slice(0, pageSize);
  const last = page.at(-1);
  return { rows: page, nextCursor: rows.length > pageSize && last ? encodeCursor({ createdUs: last.created_us, id: last.id }) : '' };
}
