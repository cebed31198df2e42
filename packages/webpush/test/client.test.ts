/**
 * PushClient against local push-service stand-ins: HTTP/2 over TLS (self-signed certificate made for the
 * test), h2c, and HTTP/1.1-only servers. The servers count sessions and concurrent streams themselves.
 */
import assert from 'node:assert/strict';
import { createECDH, createPublicKey, randomBytes, verify } from 'node:crypto';
import { after, before, test } from 'node:test';
import net from 'node:net';
import { performance } from 'node:perf_hooks';

import ece from 'http_ece';

import {
  encrypt,
  generateVapidKeys,
  PushClient,
  PushNetworkError,
  VapidSigner,
  type PushClientOptions,
  type PushResponse,
} from '../src/index.js';
import { selfSignedCert, type SelfSigned } from './helpers/cert.js';
import { startPeer, type Peer, type Reply } from './helpers/peer.js';

let cert: SelfSigned;
before(() => {
  cert = selfSignedCert();
});

const AUTH = 'vapid t=eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9.e30.c2ln, k=BKey';
const body = (n = 120): Buffer => randomBytes(n);

function client(options: PushClientOptions = {}): PushClient {
  return new PushClient({ tls: { ca: cert.cert }, ...options });
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  assert.fail('expected a rejection');
}

const peers: Peer[] = [];
async function peer(options: Parameters<typeof startPeer>[0]): Promise<Peer> {
  const p = await startPeer({ cert, ...options });
  peers.push(p);
  return p;
}
after(async () => {
  await Promise.all(peers.map((p) => p.close()));
});

test('h2 over TLS: 500 requests share one session and never exceed the stream limit', async () => {
  const server = await peer({ kind: 'h2', delayMs: 3 });
  const c = client({ maxConcurrentStreams: 20 });
  let sawQueue = false;
  const sends: Array<Promise<PushResponse>> = [];
  for (let i = 0; i < 500; i++) {
    sends.push(c.send({ endpoint: `${server.origin}/push/${i}`, body: body(), ttl: 60, vapidAuthorization: AUTH }));
    const s = c.stats(server.origin)!;
    if (s.queued > 0) sawQueue = true;
    assert.ok(s.inFlight <= 20);
  }
  const responses = await Promise.all(sends);
  assert.equal(responses.length, 500);
  for (const r of responses) assert.equal(r.status, 201);
  assert.ok(sawQueue);
  assert.equal(server.requests, 500);
  assert.equal(server.connections, 1);
  assert.equal(server.maxConcurrent, 20);
  assert.deepEqual(c.stats(server.origin), { protocol: 'h2', inFlight: 0, queued: 0, sessions: 1, sessionsOpened: 1, http1Sockets: 0 });
  await c.close();
  assert.equal(c.stats(server.origin), undefined);
});

test('headers arrive exactly as specified; retry-after, location and an error body come back', async () => {
  const server = await peer({
    kind: 'h2',
    reply: (req): Reply =>
      req.headers[':path'] === '/slow-down'
        ? { status: 429, headers: { 'retry-after': '7' }, body: '{"reason":"too many"}' }
        : { status: 201, headers: { location: 'https://push.example/m/42' } },
  });
  const c = client();
  const payload = body(321);
  const full = await c.send({
    endpoint: `${server.origin}/push/abc?x=1`,
    body: payload,
    ttl: 2419200,
    urgency: 'high',
    topic: 'order-42_A',
    vapidAuthorization: AUTH,
  });
  assert.equal(full.status, 201);
  assert.deepEqual(full.headers, { location: 'https://push.example/m/42' });
  assert.equal(full.body, undefined);
  assert.ok(full.durationMs > 0 && full.durationMs < 10_000);
  const got = server.received[0]!;
  assert.deepEqual(got.headers, {
    ':method': 'POST',
    ':path': '/push/abc?x=1',
    ':scheme': 'https',
    ':authority': server.origin.slice('https://'.length),
    ttl: '2419200',
    'content-encoding': 'aes128gcm',
    'content-type': 'application/octet-stream',
    'content-length': '321',
    authorization: AUTH,
    urgency: 'high',
    topic: 'order-42_A',
  });
  assert.deepEqual(got.body, payload);

  const slow = await c.send({ endpoint: `${server.origin}/slow-down`, body: body(10), ttl: 0, vapidAuthorization: AUTH });
  assert.deepEqual(slow, { status: 429, headers: { 'retry-after': '7' }, durationMs: slow.durationMs, body: '{"reason":"too many"}' });
  const minimal = server.received[1]!.headers;
  assert.equal(minimal['ttl'], '0');
  assert.equal('urgency' in minimal, false);
  assert.equal('topic' in minimal, false);
  await c.close();
});

test('invalid requests are refused before anything is sent', async () => {
  const server = await peer({ kind: 'h2' });
  const c = client();
  const base = { endpoint: `${server.origin}/p`, body: body(), ttl: 60, vapidAuthorization: AUTH };
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ topic: 'a'.repeat(33) }, /topic must be 1 to 32 characters/],
    [{ topic: 'has space' }, /topic/],
    [{ topic: 'dot.ted' }, /topic/],
    [{ topic: '' }, /topic/],
    [{ urgency: 'urgent' }, /urgency must be one of very-low, low, normal, high/],
    [{ ttl: -1 }, /ttl must be a non-negative integer/],
    [{ ttl: 1.5 }, /ttl/],
    [{ endpoint: 'not a url' }, /endpoint is not a URL/],
    [{ endpoint: 'ftp://x/y' }, /endpoint must be https/],
    [{ endpoint: 'http://127.0.0.1:1/p' }, /plain http: endpoints are refused/],
    [{ vapidAuthorization: 'vapid t=x\r\nX-Evil: 1' }, /single-line/],
    [{ body: 'text' }, /body must be a Buffer/],
  ];
  for (const [override, message] of cases) {
    const err = await rejection(c.send({ ...base, ...override } as unknown as Parameters<PushClient['send']>[0]));
    assert.ok(err instanceof TypeError || err instanceof RangeError, String(err));
    assert.match((err as Error).message, message);
  }
  const ok = await c.send({ ...base, topic: 'a'.repeat(32), urgency: 'very-low' });
  assert.equal(ok.status, 201);
  assert.equal(server.requests, 1);
  await c.close();
});

test('a request with no answer times out with a retryable PushNetworkError; the session stays usable', async () => {
  const server = await peer({ kind: 'h2', reply: (req) => (req.headers[':path'] === '/hang' ? { status: 0, hang: true } : { status: 201 }) });
  const c = client({ requestTimeoutMs: 150 });
  const started = Date.now();
  const err = await rejection(c.send({ endpoint: `${server.origin}/hang`, body: body(), ttl: 60, vapidAuthorization: AUTH }));
  assert.ok(err instanceof PushNetworkError, String(err));
  assert.equal(err.code, 'TIMEOUT');
  assert.equal(err.retryable, true);
  assert.equal(err.maybeDelivered, true);
  assert.equal(err.origin, server.origin);
  assert.ok(Date.now() - started >= 140);
  assert.equal(c.stats(server.origin)!.inFlight, 0);
  const ok = await c.send({ endpoint: `${server.origin}/fine`, body: body(), ttl: 60, vapidAuthorization: AUTH });
  assert.equal(ok.status, 201);
  assert.equal(server.connections, 1);
  await c.close();
});

test('timeouts are per request: staggered hanging requests each expire on their own deadline', async () => {
  const server = await peer({ kind: 'h2', reply: (req) => (req.headers[':path']!.startsWith('/hang') ? { status: 0, hang: true } : { status: 201 }) });
  const c = client({ requestTimeoutMs: 200 });
  await c.send({ endpoint: `${server.origin}/warm`, body: body(), ttl: 60, vapidAuthorization: AUTH }); // connected
  const timed = async (path: string): Promise<number> => {
    const t0 = performance.now();
    const err = await rejection(c.send({ endpoint: `${server.origin}${path}`, body: body(), ttl: 60, vapidAuthorization: AUTH }));
    assert.ok(err instanceof PushNetworkError && err.code === 'TIMEOUT', String(err));
    return performance.now() - t0;
  };
  const first = timed('/hang/1');
  await new Promise((r) => setTimeout(r, 100));
  const second = timed('/hang/2');
  const quick = c.send({ endpoint: `${server.origin}/ok`, body: body(), ttl: 60, vapidAuthorization: AUTH });
  const [d1, d2, ok] = await Promise.all([first, second, quick]);
  assert.equal(ok.status, 201);
  for (const d of [d1, d2]) assert.ok(d >= 195 && d < 450, `timed out after ${d} ms`);
  assert.equal(c.stats(server.origin)!.inFlight, 0);
  await c.close();
});

test('a session that stops answering (no response, no PING ack) is replaced', async () => {
  // h2c through a TCP relay that can black-hole the connections it carries
  const backend = await peer({ kind: 'h2c' });
  const backendPort = Number(new URL(backend.origin).port);
  const relays: Array<{ frozen: boolean; close(): void }> = [];
  const relay = net.createServer((down) => {
    const up = net.connect(backendPort, '127.0.0.1');
    const link = { frozen: false, close: () => (down.destroy(), up.destroy()) };
    relays.push(link);
    down.on('data', (d: Buffer) => void (link.frozen || up.write(d)));
    up.on('data', (d: Buffer) => void (link.frozen || down.write(d)));
    for (const s of [up, down]) s.on('error', () => {}).on('close', link.close);
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(relay.address() as net.AddressInfo).port}`;
  const c = client({ plaintext: 'h2c', requestTimeoutMs: 150, connectTimeoutMs: 300 });
  const send = (p: string): Promise<PushResponse> => c.send({ endpoint: `${origin}${p}`, body: body(), ttl: 60, vapidAuthorization: AUTH });
  assert.equal((await send('/1')).status, 201);
  relays[0]!.frozen = true;
  const err = await rejection(send('/2'));
  assert.ok(err instanceof PushNetworkError && err.code === 'TIMEOUT', String(err));
  await new Promise((r) => setTimeout(r, 450)); // PING unanswered for connectTimeoutMs: session destroyed
  assert.equal(c.stats(origin)!.sessions, 0);
  assert.equal((await send('/3')).status, 201);
  assert.equal(backend.connections, 2);
  assert.equal(c.stats(origin)!.sessionsOpened, 2);
  await c.close();
  for (const r of relays) r.close();
  await new Promise((r) => relay.close(r));
});

test('an idle session is closed after idleTimeoutMs and reopened on demand', async () => {
  const server = await peer({ kind: 'h2' });
  const c = client({ idleTimeoutMs: 100 });
  const send = (): Promise<PushResponse> => c.send({ endpoint: `${server.origin}/p`, body: body(), ttl: 60, vapidAuthorization: AUTH });
  assert.equal((await send()).status, 201);
  assert.equal(c.stats(server.origin)!.sessions, 1);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(c.stats(server.origin)!.sessions, 0);
  assert.equal((await send()).status, 201);
  assert.deepEqual(
    { sessions: c.stats(server.origin)!.sessions, opened: c.stats(server.origin)!.sessionsOpened, server: server.connections },
    { sessions: 1, opened: 2, server: 2 },
  );
  await c.close();
});

test('a TLS server that only speaks HTTP/1.1 is used through the keep-alive fallback', async () => {
  const server = await peer({ kind: 'https1', delayMs: 2 });
  const c = client({ http1MaxSockets: 4 });
  const payload = body(77);
  const responses = await Promise.all(
    Array.from({ length: 200 }, (_, i) =>
      c.send({ endpoint: `${server.origin}/push/${i}`, body: payload, ttl: 30, urgency: 'low', topic: 't1', vapidAuthorization: AUTH }),
    ),
  );
  for (const r of responses) assert.equal(r.status, 201);
  assert.equal(server.requests, 200);
  assert.ok(server.received.every((r) => r.httpVersion === '1.1'));
  assert.ok(server.maxConcurrent <= 4, `max concurrent ${server.maxConcurrent}`);
  assert.ok(server.connections <= 4, `connections ${server.connections}`);
  const h = server.received[0]!.headers;
  assert.deepEqual(
    { ttl: h['ttl'], enc: h['content-encoding'], type: h['content-type'], len: h['content-length'], auth: h['authorization'], u: h['urgency'], t: h['topic'] },
    { ttl: '30', enc: 'aes128gcm', type: 'application/octet-stream', len: '77', auth: AUTH, u: 'low', t: 't1' },
  );
  assert.deepEqual(server.received[0]!.body, payload);
  const stats = c.stats(server.origin)!;
  assert.equal(stats.protocol, 'http1');
  assert.equal(stats.sessionsOpened, 0);
  assert.ok(stats.http1Sockets >= 1 && stats.http1Sockets <= 4);
  await c.close();
});

test('plain http: h2c with prior knowledge, or HTTP/1.1, as configured', async () => {
  const h2c = await peer({ kind: 'h2c' });
  const c1 = client({ plaintext: 'h2c' });
  const r1 = await Promise.all([1, 2, 3].map((i) => c1.send({ endpoint: `${h2c.origin}/p/${i}`, body: body(), ttl: 5, vapidAuthorization: AUTH })));
  assert.deepEqual(r1.map((r) => r.status), [201, 201, 201]);
  assert.equal(h2c.connections, 1);
  assert.equal(h2c.received[0]!.headers[':scheme'], 'http');
  assert.equal(c1.stats(h2c.origin)!.protocol, 'h2');
  await c1.close();

  const h1 = await peer({ kind: 'http1' });
  const c2 = client({ plaintext: 'http1' });
  const r2 = await c2.send({ endpoint: `${h1.origin}/p`, body: body(), ttl: 5, vapidAuthorization: AUTH });
  assert.equal(r2.status, 201);
  assert.equal(h1.received[0]!.httpVersion, '1.1');
  await c2.close();
});

test('graceful GOAWAY: the client moves to a new session and no request is lost', async () => {
  const server = await peer({
    kind: 'h2',
    delayMs: 1,
    onStream: (session, n) => {
      if (n === 50) session.close(); // GOAWAY(NO_ERROR); streams already open still get answers
    },
  });
  const c = client({ maxConcurrentStreams: 10 });
  const responses = await Promise.all(
    Array.from({ length: 300 }, (_, i) => c.send({ endpoint: `${server.origin}/p/${i}`, body: body(), ttl: 60, vapidAuthorization: AUTH })),
  );
  for (const r of responses) assert.equal(r.status, 201);
  assert.ok(server.connections >= 6, `sessions ${server.connections}`);
  const stats = c.stats(server.origin)!;
  assert.equal(stats.sessionsOpened, server.connections);
  assert.equal(stats.inFlight, 0);
  await c.close();
});

test('GOAWAY that refuses streams in flight: refused streams are re-sent on a new session, once each', async () => {
  let lastStreamId = Infinity;
  let refused = 0;
  const server = await peer({
    kind: 'h2',
    delayMs: 5,
    onStream: (session, n, stream) => {
      // The first session stops after its 20th stream: GOAWAY(lastStreamID = that stream). Streams above it
      // are not processed (RFC 9113 section 6.8), so the client may safely send them again.
      if (stream.id! > lastStreamId && server.connections === 1) {
        refused++;
        return 'ignore';
      }
      if (n === 20 && server.connections === 1) {
        lastStreamId = stream.id!;
        session.goaway(0, lastStreamId);
      }
      return undefined;
    },
  });
  const c = client({ maxConcurrentStreams: 50 });
  const responses = await Promise.all(
    Array.from({ length: 200 }, (_, i) => c.send({ endpoint: `${server.origin}/p/${i}`, body: body(), ttl: 60, vapidAuthorization: AUTH })),
  );
  for (const r of responses) assert.equal(r.status, 201);
  assert.ok(refused > 0, 'some streams were refused');
  assert.equal(server.connections, 2);
  assert.equal(c.stats(server.origin)!.sessionsOpened, 2);
  assert.equal(server.requests, 200); // each processed exactly once
  assert.equal(new Set(server.received.map((r) => r.headers[':path'])).size, 200);
  await c.close();
});

test('a connection torn down mid-flight rejects those requests as retryable; later ones reconnect', async () => {
  const server = await peer({
    kind: 'h2',
    delayMs: 20,
    onStream: (session, n) => {
      if (n === 10 && server.connections === 1) session.destroy();
    },
  });
  const c = client({ maxConcurrentStreams: 10 });
  const results = await Promise.allSettled(
    Array.from({ length: 10 }, (_, i) => c.send({ endpoint: `${server.origin}/p/${i}`, body: body(), ttl: 60, vapidAuthorization: AUTH })),
  );
  const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
  assert.ok(failures.length >= 1);
  for (const f of failures) {
    assert.ok(f.reason instanceof PushNetworkError, String(f.reason));
    assert.equal(f.reason.retryable, true);
    assert.equal(f.reason.code, 'RESET');
  }
  const again = await c.send({ endpoint: `${server.origin}/p/again`, body: body(), ttl: 60, vapidAuthorization: AUTH });
  assert.equal(again.status, 201);
  assert.equal(server.connections, 2);
  assert.equal(c.stats(server.origin)!.sessionsOpened, 2);
  await c.close();
});

test('connection refused and untrusted certificates reject with typed errors', async () => {
  const gone = await peer({ kind: 'h2' });
  await gone.close();
  const c = client();
  const refused = await rejection(c.send({ endpoint: `${gone.origin}/p`, body: body(), ttl: 60, vapidAuthorization: AUTH }));
  assert.ok(refused instanceof PushNetworkError);
  assert.equal(refused.code, 'CONNECT');
  assert.equal(refused.retryable, true);
  assert.equal(refused.maybeDelivered, false);
  await c.close();

  const server = await peer({ kind: 'h2' });
  const strict = new PushClient();
  const untrusted = await rejection(strict.send({ endpoint: `${server.origin}/p`, body: body(), ttl: 60, vapidAuthorization: AUTH }));
  assert.ok(untrusted instanceof PushNetworkError);
  assert.equal(untrusted.code, 'TLS');
  assert.equal(untrusted.retryable, false);
  await strict.close();

  const lax = new PushClient({ tls: { rejectUnauthorized: false } });
  assert.equal((await lax.send({ endpoint: `${server.origin}/p`, body: body(), ttl: 60, vapidAuthorization: AUTH })).status, 201);
  await lax.close();
});

test('flow control: bodies beyond the peer\'s stream window and frame size arrive whole, in order', async () => {
  const server = await peer({ kind: 'h2', settings: { initialWindowSize: 1_000 } });
  const c = client();
  const bodies = [body(20_000), body(3_000), body(999), body(1_001)];
  const responses = await Promise.all(
    bodies.map((b, i) => c.send({ endpoint: `${server.origin}/p/${i}`, body: b, ttl: 60, vapidAuthorization: AUTH })),
  );
  assert.deepEqual(responses.map((r) => r.status), [201, 201, 201, 201]);
  const byPath = new Map(server.received.map((r) => [r.headers[':path'], r.body]));
  bodies.forEach((b, i) => assert.ok(byPath.get(`/p/${i}`)?.equals(b), `body ${i}`));
  await c.close();
});

test('a response header block split over CONTINUATION frames, and the peer\'s PING, are handled', async () => {
  let pinged: Promise<Error | null> | undefined;
  const big = 'v'.repeat(40_000);
  const server = await peer({
    kind: 'h2',
    reply: () => ({ status: 429, headers: { 'retry-after': '7', 'x-big': big } }),
    onStream: (session) => {
      pinged ??= new Promise((resolve) => session.ping((err) => resolve(err)));
    },
  });
  const c = client();
  const response = await c.send({ endpoint: `${server.origin}/p`, body: body(), ttl: 60, vapidAuthorization: AUTH });
  assert.equal(response.status, 429);
  assert.deepEqual(response.headers, { 'retry-after': '7' });
  assert.equal(await pinged, null);
  // The HPACK table stayed in step: a second answer on the same session decodes too.
  assert.equal((await c.send({ endpoint: `${server.origin}/p`, body: body(), ttl: 60, vapidAuthorization: AUTH })).status, 429);
  assert.equal(c.stats(server.origin)!.sessionsOpened, 1);
  await c.close();
});

interface RawFrame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

function rawFrame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const frame = Buffer.alloc(9 + payload.length);
  frame.writeUIntBE(payload.length, 0, 3);
  frame[3] = type;
  frame[4] = flags;
  frame.writeUInt32BE(streamId, 5);
  payload.copy(frame, 9);
  return frame;
}

/**
 * A misbehaving h2c peer written frame by frame: it answers the client preface with an empty SETTINGS,
 * hands each request's stream id to `misbehave`, and records every frame the client sends.
 */
async function rawPeer(misbehave: (socket: net.Socket, streamId: number) => void): Promise<{ origin: string; frames: RawFrame[]; close(): Promise<void> }> {
  const frames: RawFrame[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    let pending = Buffer.alloc(0);
    let prefaceRead = false;
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      if (!prefaceRead) {
        if (pending.length < 24) return;
        assert.equal(pending.subarray(0, 24).toString('latin1'), 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
        pending = pending.subarray(24);
        prefaceRead = true;
        socket.write(rawFrame(0x4, 0, 0, Buffer.alloc(0)));
      }
      while (pending.length >= 9 && pending.length >= 9 + pending.readUIntBE(0, 3)) {
        const length = pending.readUIntBE(0, 3);
        const frame = { type: pending[3]!, flags: pending[4]!, streamId: pending.readUInt32BE(5) & 0x7fffffff, payload: Buffer.from(pending.subarray(9, 9 + length)) };
        pending = pending.subarray(9 + length);
        frames.push(frame);
        if (frame.type === 0x1) misbehave(socket, frame.streamId);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    frames,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

test('a peer that breaks the protocol gets GOAWAY with the matching error code; its requests fail as retryable resets', async () => {
  const cases: Array<[string, (socket: net.Socket, streamId: number) => void, number]> = [
    // HPACK index 0 is invalid (RFC 7541 section 6.1): COMPRESSION_ERROR.
    ['an undecodable header block', (socket, id) => socket.write(rawFrame(0x1, 0x5, id, Buffer.from([0x80]))), 0x9],
    // Push was disabled in our SETTINGS: PROTOCOL_ERROR.
    ['a PUSH_PROMISE', (socket, id) => socket.write(rawFrame(0x5, 0x4, id, Buffer.from([0, 0, 0, 2, 0x82]))), 0x1],
    // Above the 16,384-octet frame size we allow: FRAME_SIZE_ERROR.
    ['an oversized frame', (socket, id) => socket.write(rawFrame(0x0, 0x1, id, Buffer.alloc(16_385))), 0x6],
    // DATA before any response header: PROTOCOL_ERROR.
    ['DATA before the response', (socket, id) => socket.write(rawFrame(0x0, 0x1, id, Buffer.from('x'))), 0x1],
  ];
  for (const [what, misbehave, code] of cases) {
    const server = await rawPeer(misbehave);
    const c = client({ plaintext: 'h2c' });
    const err = await rejection(c.send({ endpoint: `${server.origin}/p`, body: body(), ttl: 60, vapidAuthorization: AUTH }));
    assert.ok(err instanceof PushNetworkError, `${what}: ${String(err)}`);
    assert.deepEqual({ code: err.code, retryable: err.retryable, maybeDelivered: err.maybeDelivered }, { code: 'RESET', retryable: true, maybeDelivered: true }, what);
    const deadline = Date.now() + 2_000;
    while (!server.frames.some((frame) => frame.type === 0x7) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const goaway = server.frames.find((frame) => frame.type === 0x7);
    assert.ok(goaway, `${what}: no GOAWAY`);
    assert.equal(goaway.payload.readUInt32BE(4), code, what);
    assert.equal(c.stats(server.origin)!.sessions, 0, what);
    await c.close();
    await server.close();
  }
});

test('back-pressure: beyond maxQueuedPerOrigin, sends reject with QUEUE_FULL (never sent)', async () => {
  const server = await peer({ kind: 'h2', delayMs: 20 });
  const c = client({ maxConcurrentStreams: 1, maxQueuedPerOrigin: 2 });
  const send = (i: number): Promise<PushResponse> => c.send({ endpoint: `${server.origin}/p/${i}`, body: body(), ttl: 60, vapidAuthorization: AUTH });
  const results = await Promise.allSettled([send(1), send(2), send(3)]);
  assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'fulfilled', 'rejected']);
  const reason = (results[2] as PromiseRejectedResult).reason as PushNetworkError;
  assert.ok(reason instanceof PushNetworkError);
  assert.equal(reason.code, 'QUEUE_FULL');
  assert.equal(reason.maybeDelivered, false);
  assert.equal(server.requests, 2);
  await c.close();
});

test('close() drains queued and in-flight requests, then refuses new ones', async () => {
  const server = await peer({ kind: 'h2', delayMs: 10 });
  const c = client({ maxConcurrentStreams: 5 });
  const sends = Array.from({ length: 40 }, (_, i) => c.send({ endpoint: `${server.origin}/p/${i}`, body: body(), ttl: 60, vapidAuthorization: AUTH }));
  const closed = c.close();
  const after = await rejection(c.send({ endpoint: `${server.origin}/late`, body: body(), ttl: 60, vapidAuthorization: AUTH }));
  assert.ok(after instanceof PushNetworkError);
  assert.equal(after.code, 'CLOSED');
  const responses = await Promise.all(sends);
  await closed;
  assert.equal(responses.filter((r) => r.status === 201).length, 40);
  assert.equal(server.requests, 40);
});

test('end to end: encrypt + VAPID + send; the peer decrypts with the subscriber key and verifies the JWT', async () => {
  const ua = createECDH('prime256v1');
  ua.generateKeys();
  const sub = { p256dh: ua.getPublicKey('base64url'), auth: randomBytes(16).toString('base64url') };
  const vapid = { ...generateVapidKeys(), subject: 'https://herald.example/contact' };
  const server = await peer({ kind: 'h2' });
  const c = client();
  const signer = new VapidSigner();
  const payload = Buffer.from(JSON.stringify({ title: 'Approve deploy?', id: 7 }));
  const r = await c.send({
    endpoint: `${server.origin}/wpush/v2/abc`,
    body: encrypt(payload, sub),
    ttl: 3600,
    urgency: 'normal',
    vapidAuthorization: signer.authorization(vapid, server.origin),
  });
  assert.equal(r.status, 201);
  const got = server.received[0]!;
  assert.deepEqual(ece.decrypt(got.body, { version: 'aes128gcm', privateKey: ua, authSecret: sub.auth }), payload);
  const m = /^vapid t=([^.]+)\.([^.]+)\.([^,]+), k=(.+)$/.exec(got.headers['authorization']!)!;
  assert.equal(m[4], vapid.publicKey);
  const claims = JSON.parse(Buffer.from(m[2]!, 'base64url').toString()) as { aud: string };
  assert.equal(claims.aud, server.origin);
  const pub = Buffer.from(vapid.publicKey, 'base64url');
  const key = createPublicKey({ format: 'jwk', key: { kty: 'EC', crv: 'P-256', x: pub.subarray(1, 33).toString('base64url'), y: pub.subarray(33).toString('base64url') } });
  assert.equal(verify('sha256', Buffer.from(`${m[1]}.${m[2]}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(m[3]!, 'base64url')), true);
  await c.close();
});
