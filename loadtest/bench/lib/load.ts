// A small closed-loop HTTP/1.1 load generator on raw keep-alive sockets (no dependency).
// `connections` sockets each send one request, wait for the whole response, then send the next
// (no pipelining), like autocannon's default. Requests rotate round-robin over `requests`
// (prebuilt buffers, e.g. one per API key). Only responses that complete inside the measured
// window (after `warmupMs`, for `durationMs`) count toward throughput and latency.
// Closed loop: latency excludes queueing the client never saw (coordinated omission).
import { connect, type Socket } from 'node:net';

const HEADER_END = Buffer.from('\r\n\r\n');
const CHUNKED_END = Buffer.from('\r\n0\r\n\r\n');

/** Request bytes for GET `path`, with extra headers. */
export function getRequest(host: string, port: number, path: string, headers: Record<string, string> = {}): Buffer {
  const lines = [`GET ${path} HTTP/1.1`, `Host: ${host}:${port}`, 'Accept: application/json'];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
}

/** Request bytes for POST `path` with a JSON body, with extra headers. */
export function postRequest(host: string, port: number, path: string, body: unknown, headers: Record<string, string> = {}): Buffer {
  const json = Buffer.from(JSON.stringify(body), 'utf8');
  const lines = [`POST ${path} HTTP/1.1`, `Host: ${host}:${port}`, 'Accept: application/json', 'Content-Type: application/json', `Content-Length: ${json.length}`];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), json]);
}

/** The p-th percentile of ascending `sorted` (nearest rank); NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? Number.NaN;
}

export interface LoadOptions {
  host: string;
  port: number;
  /** Rotated round-robin, one per request. */
  requests: Buffer[];
  connections: number;
  /** Load before the measured window (not counted). */
  warmupMs: number;
  /** The measured window. */
  durationMs: number;
  /** Per request; a timed-out socket is replaced. */
  timeoutMs?: number;
  /** Lower-case header whose smallest integer value is reported. */
  watchHeader?: string | undefined;
  /** Called (synchronously, from a timer) as the measured window opens ... */
  onWindowStart?: () => void;
  /** ... and as it closes. */
  onWindowEnd?: () => void;
  /** Every completed response (e.g. to count what the bodies say); `inWindow`: inside the measured window. */
  onResponse?: (index: number, status: number, body: Buffer, inWindow: boolean) => void;
}

export interface LoadResult {
  durationSec: number;
  /** Responses completed inside the measured window. */
  requests: number;
  ok: number;
  nonOk: number;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
  /** Status code -> count, inside the window. */
  statuses: Record<number, number>;
  socketErrors: number;
  timeouts: number;
  dropped: number;
  totalResponses: number;
  /** Completed responses per index of `requests`, whole run (warm-up included). */
  perRequestIndex: Uint32Array;
  watchedMin: number | null;
  sampleBody: { status: number; body: string } | null;
}

export function runLoad({
  host,
  port,
  requests,
  connections,
  warmupMs,
  durationMs,
  timeoutMs = 10_000,
  watchHeader,
  onWindowStart,
  onWindowEnd,
  onResponse,
}: LoadOptions): Promise<LoadResult> {
  return new Promise((resolve) => {
    const start = performance.now();
    const windowStart = start + warmupMs;
    const windowEnd = windowStart + durationMs;
    const latenciesMs: number[] = [];
    const statuses = new Map<number, number>(); // inside the window
    const perRequestIndex = new Uint32Array(requests.length); // every completed response, whole run
    let total = 0;
    let socketErrors = 0;
    let timeouts = 0;
    let dropped = 0;
    const sockets = new Set<Socket>();
    let next = 0;
    let open = 0;
    let stopping = false;
    let sampleBody: LoadResult['sampleBody'] = null;
    let watchedMin = Number.POSITIVE_INFINITY;
    const watchPattern = watchHeader ? new RegExp(`\\r\\n${watchHeader}:\\s*(-?\\d+)`, 'i') : null;
    let finished = false;

    const finish = (): void => {
      if (finished) return;
      finished = true;
      for (const socket of sockets) socket.destroy();
      latenciesMs.sort((a, b) => a - b);
      const measured = latenciesMs.length;
      let ok = 0;
      for (const [status, count] of statuses) if (status >= 200 && status < 300) ok += count;
      resolve({
        durationSec: durationMs / 1_000,
        requests: measured,
        ok,
        nonOk: measured - ok,
        rps: measured / (durationMs / 1_000),
        p50: percentile(latenciesMs, 50),
        p90: percentile(latenciesMs, 90),
        p99: percentile(latenciesMs, 99),
        max: latenciesMs[measured - 1] ?? Number.NaN,
        mean: measured ? latenciesMs.reduce((sum, value) => sum + value, 0) / measured : Number.NaN,
        statuses: Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])),
        socketErrors,
        timeouts,
        dropped,
        totalResponses: total,
        perRequestIndex,
        watchedMin: Number.isFinite(watchedMin) ? watchedMin : null,
        sampleBody,
      });
    };

    const openConnection = (): void => {
      open += 1;
      const socket = connect({ host, port, noDelay: true });
      sockets.add(socket);
      let pending: Buffer | null = null;
      let sentAt = 0;
      let sentIndex = 0;
      let timer: NodeJS.Timeout | undefined;
      let busy = false;

      const send = (): void => {
        if (stopping) {
          socket.end();
          return;
        }
        sentIndex = next;
        next = (next + 1) % requests.length;
        busy = true;
        sentAt = performance.now();
        timer = setTimeout(() => {
          timeouts += 1;
          socket.destroy();
        }, timeoutMs);
        socket.write(requests[sentIndex] as Buffer);
      };

      const complete = (status: number, head: string, body: Buffer): void => {
        clearTimeout(timer);
        busy = false;
        const now = performance.now();
        total += 1;
        perRequestIndex[sentIndex] = (perRequestIndex[sentIndex] ?? 0) + 1;
        const inWindow = now >= windowStart && now < windowEnd;
        if (inWindow) {
          latenciesMs.push(now - sentAt);
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        }
        onResponse?.(sentIndex, status, body, inWindow);
        if (watchPattern) {
          const match = watchPattern.exec(head);
          if (match) watchedMin = Math.min(watchedMin, Number(match[1]));
        }
        if (sampleBody === null || (status >= 300 && sampleBody.status < 300)) {
          sampleBody = { status, body: body.toString('utf8').slice(0, 600) };
        }
        if (now >= windowEnd) stopping = true;
        send();
      };

      socket.on('connect', send);
      socket.on('data', (chunk: Buffer) => {
        let buffered: Buffer = pending ? Buffer.concat([pending, chunk]) : chunk;
        pending = buffered;
        for (;;) {
          const headerEnd = buffered.indexOf(HEADER_END);
          if (headerEnd === -1) return;
          const head = buffered.toString('latin1', 0, headerEnd);
          const status = Number(head.slice(9, 12));
          const bodyStart = headerEnd + 4;
          const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
          let end: number;
          if (length) {
            end = bodyStart + Number(length[1]);
            if (buffered.length < end) return;
          } else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
            const terminator = buffered.indexOf(CHUNKED_END, headerEnd);
            if (terminator === -1) return;
            end = terminator + CHUNKED_END.length;
          } else {
            end = bodyStart;
          }
          const body = buffered.subarray(bodyStart, end);
          pending = end < buffered.length ? buffered.subarray(end) : null;
          complete(status, head, body);
          if (!pending) return;
          buffered = pending;
        }
      });
      socket.on('error', () => {
        socketErrors += 1;
      });
      socket.on('close', () => {
        clearTimeout(timer);
        sockets.delete(socket);
        open -= 1;
        if (busy) dropped += 1; // closed (or timed out) with a request in flight
        if (!stopping && performance.now() < windowEnd) {
          // Replace the connection, after a pause so a dead server is not hammered.
          open += 1;
          setTimeout(() => {
            open -= 1;
            openConnection();
          }, 50);
          return;
        }
        if (open === 0) finish();
      });
    };

    for (let index = 0; index < connections; index += 1) openConnection();
    if (onWindowStart) setTimeout(onWindowStart, warmupMs);
    // Stop even if every socket is stuck: at the end of the window plus one request timeout.
    setTimeout(() => {
      stopping = true;
      onWindowEnd?.();
      setTimeout(finish, timeoutMs + 1_000).unref();
    }, warmupMs + durationMs).unref();
  });
}
