/**
 * The benchmark's counting push service, run as a child process (so its CPU is not charged to the sender):
 * HTTP/2 over TLS with HTTP/1.1 fallback via ALPN (`allowHTTP1`), answering 201 to every POST.
 * Talks to the parent over IPC: sends {port} when listening; answers 'stats' with its counters.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';

const key = process.env['BENCH_TLS_KEY'];
const cert = process.env['BENCH_TLS_CERT'];
if (key === undefined || cert === undefined || process.send === undefined) {
  throw new Error('run by bench/throughput.js (needs BENCH_TLS_KEY, BENCH_TLS_CERT and an IPC channel)');
}
const send = process.send.bind(process);

const stats = { h2Requests: 0, h1Requests: 0, h2Sessions: 0, tlsConnections: 0, bytes: 0 };

const server = http2.createSecureServer(
  { key, cert, allowHTTP1: true, settings: { maxConcurrentStreams: 1000 } },
  (req, res) => {
    if (req.httpVersionMajor === 2) stats.h2Requests++;
    else stats.h1Requests++;
    req.on('data', (chunk: Buffer) => {
      stats.bytes += chunk.length;
    });
    req.on('end', () => {
      res.writeHead(201, { location: '/m/1' });
      res.end();
    });
  },
);
server.on('session', () => stats.h2Sessions++);
server.on('secureConnection', () => stats.tlsConnections++);

server.listen(0, '127.0.0.1', () => {
  send({ port: (server.address() as AddressInfo).port });
});
process.on('message', (message) => {
  if (message === 'stats') send({ stats });
  if (message === 'exit') server.close(() => process.exit(0));
});
process.on('disconnect', () => process.exit(0));
