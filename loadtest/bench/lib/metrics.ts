// What consumes a stack's metrics during a benchmark, as in production: a scraper that reads every
// process's /metrics on Prometheus's schedule, and a local OTLP/HTTP receiver that accepts the
// periodic metric exports (and discards them). Both count what they got, so a round can show that
// its metrics really were produced and read.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ScrapeCounts {
  scrapes: number;
  failures: number;
  bytes: number;
}

/** GETs every URL every `intervalMs` (the first at once), reading each body in full, until `stop()`. */
export function scrapeEvery(urls: readonly string[], intervalMs: number): { stop(): Promise<ScrapeCounts> } {
  const counts: ScrapeCounts = { scrapes: 0, failures: 0, bytes: 0 };
  const scrapeOne = async (url: string): Promise<void> => {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
      const body = await response.text();
      if (response.status === 200 && body.length > 0) {
        counts.scrapes += 1;
        counts.bytes += body.length;
      } else counts.failures += 1;
    } catch {
      counts.failures += 1;
    }
  };
  let round = Promise.all(urls.map(scrapeOne));
  const timer = setInterval(() => {
    round = round.then(() => Promise.all(urls.map(scrapeOne)));
  }, intervalMs);
  return {
    async stop() {
      clearInterval(timer);
      await round;
      return { ...counts };
    },
  };
}

export interface OtlpReceiver {
  /** For OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (the full URL, /v1/metrics). */
  endpoint: string;
  counts(): { exports: number; bytes: number };
  close(): Promise<void>;
}

/** An OTLP/HTTP metrics receiver on 127.0.0.1: each POST to /v1/metrics is read and answered 200 (an empty ExportMetricsServiceResponse). */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  let exports = 0;
  let bytes = 0;
  const server = createServer((request, response) => {
    let size = 0;
    request.on('data', (chunk: Buffer) => (size += chunk.length));
    request.on('end', () => {
      if (request.method === 'POST' && request.url === '/v1/metrics') {
        exports += 1;
        bytes += size;
        response.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' }).end();
      } else response.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}/v1/metrics`,
    counts: () => ({ exports, bytes }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
