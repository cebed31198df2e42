// COPY ... FROM STDIN over a pg client, without pg-copy-streams: a "submittable" (pg's extension
// point for custom queries) that answers the server's CopyInResponse by writing the chunks of an
// async iterable as CopyData messages, waits for the socket to drain when it is full, and ends
// with CopyDone. Resolves with the row count the server reports ("COPY <n>").
import { once } from 'node:events';

import type { Client, Connection } from 'pg';

import { log } from './bench.js';

/** The parts of pg's Connection the COPY sub-protocol uses (pg has them; @types/pg does not declare them). */
interface CopyWire {
  stream: NodeJS.WritableStream & { writableNeedDrain?: boolean };
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
  sendCopyFail(message: string): void;
}

class CopyIn {
  readonly done: Promise<number>;
  private settle!: (error: Error | undefined) => void;
  private rows = 0;
  private failed: Error | undefined;

  constructor(
    private readonly sql: string,
    private readonly source: AsyncIterable<Buffer | string>,
  ) {
    this.done = new Promise<number>((resolve, reject) => {
      let settled = false;
      this.settle = (error) => {
        if (settled) return;
        settled = true;
        if (error) reject(error);
        else resolve(this.rows);
      };
    });
  }

  submit(connection: Connection): void {
    connection.query(this.sql);
  }

  handleCopyInResponse(connection: Connection): void {
    void this.pump(connection as unknown as CopyWire);
  }

  private async pump(wire: CopyWire): Promise<void> {
    try {
      for await (const chunk of this.source) {
        if (this.failed) break;
        wire.sendCopyFromChunk(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
        if (wire.stream.writableNeedDrain) await once(wire.stream, 'drain');
      }
      // After a server error this still ends copy mode, so the connection becomes ready again.
      wire.endCopyFrom();
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.settle(new Error(`COPY source failed: ${message}`));
      wire.sendCopyFail(message.slice(0, 200));
    }
  }

  handleCommandComplete(message: { text?: string }): void {
    this.rows = Number(/^COPY (\d+)$/.exec(message.text ?? '')?.[1] ?? 0);
  }

  /** A server error (pg forgets this query afterwards: no ReadyForQuery reaches it). */
  handleError(error: Error): void {
    this.failed = error;
    this.settle(error);
  }

  handleReadyForQuery(): void {
    this.settle(this.failed);
  }

  // Not part of COPY FROM; pg calls them only for other statements.
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}

/**
 * Runs `sql` (a `COPY ... FROM STDIN` statement) on `client`, streaming `source` (text or CSV
 * format as the statement says) with backpressure. Resolves with the number of rows copied.
 */
export async function copyFrom(client: Client, sql: string, source: AsyncIterable<Buffer | string>): Promise<number> {
  const copy = new CopyIn(sql, source);
  client.query(copy);
  return copy.done;
}

export interface Seeding {
  rows: number;
  copyMs: number;
  vacuumMs: number;
}

/**
 * Writes `expected` benchmark subscribers into audience.subscribers with COPY (`columns`, text
 * format rows from `source`), then VACUUM (ANALYZE): the visibility map then allows index-only
 * scans and the planner has statistics, as on a settled production table. Both steps are timed.
 */
export async function seedSubscribers(db: Client, columns: readonly string[], source: AsyncIterable<string>, expected: number): Promise<Seeding> {
  const seconds = (ms: number): string => `${(ms / 1_000).toFixed(1)} s`;
  log(`seeding ${expected.toLocaleString('en-US')} subscribers with COPY`);
  const started = performance.now();
  const rows = await copyFrom(db, `COPY audience.subscribers (${columns.join(', ')}) FROM STDIN`, source);
  const copyMs = performance.now() - started;
  if (rows !== expected) throw new Error(`COPY reported ${rows} rows, expected ${expected}`);
  log(`COPY ${rows.toLocaleString('en-US')} rows in ${seconds(copyMs)}; VACUUM ANALYZE audience.subscribers`);
  const vacuumStarted = performance.now();
  await db.query('VACUUM (ANALYZE) audience.subscribers');
  const vacuumMs = performance.now() - vacuumStarted;
  log(`VACUUM ANALYZE in ${seconds(vacuumMs)}`);
  return { rows, copyMs, vacuumMs };
}
