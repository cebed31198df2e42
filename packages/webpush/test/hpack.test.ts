/**
 * HPACK: the RFC 7541 Appendix C examples byte for byte (dynamic table and eviction included), the Huffman
 * code over every symbol, each decoding error, and a live exchange with node:http2 (nghttp2), whose
 * response encoder uses Huffman coding and the dynamic table, and whose decoder checks our request blocks.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';

import { encodeHeaders, HpackDecoder, HpackError } from '../src/hpack.js';
import { HUFFMAN_CODE, huffmanDecode } from '../src/huffman.js';

type Fields = Array<[string, string]>;

function hex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}

/** A test-only Huffman encoder (the module has none): codes MSB first, padded with the top bits of EOS. */
function huffmanEncode(octets: Buffer): Buffer {
  let bits = '';
  for (const octet of octets) {
    const [code, length] = HUFFMAN_CODE[octet]!;
    bits += code.toString(2).padStart(length, '0');
  }
  bits += '1'.repeat((8 - (bits.length % 8)) % 8);
  const out = Buffer.alloc(bits.length / 8);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(bits.slice(i * 8, i * 8 + 8), 2);
  return out;
}

/** Reads the dynamic table back through indexed fields (which leave it unchanged), newest first. */
function dynamicTable(decoder: HpackDecoder): Fields {
  const entries: Fields = [];
  for (let index = 62; ; index++) {
    try {
      entries.push(...decoder.decode(Buffer.from([0x80 | index])));
    } catch (err) {
      assert.ok(err instanceof HpackError);
      return entries;
    }
  }
}

const REQUESTS: Fields[] = [
  [
    [':method', 'GET'],
    [':scheme', 'http'],
    [':path', '/'],
    [':authority', 'www.example.com'],
  ],
  [
    [':method', 'GET'],
    [':scheme', 'http'],
    [':path', '/'],
    [':authority', 'www.example.com'],
    ['cache-control', 'no-cache'],
  ],
  [
    [':method', 'GET'],
    [':scheme', 'https'],
    [':path', '/index.html'],
    [':authority', 'www.example.com'],
    ['custom-key', 'custom-value'],
  ],
];
const REQUEST_TABLES: Fields[] = [
  [[':authority', 'www.example.com']],
  [
    ['cache-control', 'no-cache'],
    [':authority', 'www.example.com'],
  ],
  [
    ['custom-key', 'custom-value'],
    ['cache-control', 'no-cache'],
    [':authority', 'www.example.com'],
  ],
];
const REQUEST_TABLE_SIZES = [57, 110, 164];

const SET_COOKIE = 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1';
const RESPONSES: Fields[] = [
  [
    [':status', '302'],
    ['cache-control', 'private'],
    ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
    ['location', 'https://www.example.com'],
  ],
  [
    [':status', '307'],
    ['cache-control', 'private'],
    ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
    ['location', 'https://www.example.com'],
  ],
  [
    [':status', '200'],
    ['cache-control', 'private'],
    ['date', 'Mon, 21 Oct 2013 20:13:22 GMT'],
    ['location', 'https://www.example.com'],
    ['content-encoding', 'gzip'],
    ['set-cookie', SET_COOKIE],
  ],
];
const RESPONSE_TABLES: Fields[] = [
  [
    ['location', 'https://www.example.com'],
    ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
    ['cache-control', 'private'],
    [':status', '302'],
  ],
  [
    [':status', '307'],
    ['location', 'https://www.example.com'],
    ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'],
    ['cache-control', 'private'],
  ],
  [
    ['set-cookie', SET_COOKIE],
    ['content-encoding', 'gzip'],
    ['date', 'Mon, 21 Oct 2013 20:13:22 GMT'],
  ],
];
const RESPONSE_TABLE_SIZES = [222, 222, 215];

function checkSequence(decoder: HpackDecoder, blocks: string[], expected: Fields[], tables: Fields[], sizes: number[]): void {
  blocks.forEach((block, i) => {
    assert.deepEqual(decoder.decode(hex(block)), expected[i], `block ${i + 1}`);
    assert.equal(decoder.tableSize, sizes[i], `table size after block ${i + 1}`);
    assert.deepEqual(dynamicTable(decoder), tables[i], `table after block ${i + 1}`);
  });
}

test('RFC 7541 C.2: one representation of each kind', () => {
  const d = new HpackDecoder();
  assert.deepEqual(d.decode(hex('400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572')), [['custom-key', 'custom-header']]);
  assert.equal(d.tableSize, 55);
  const e = new HpackDecoder();
  assert.deepEqual(e.decode(hex('040c 2f73 616d 706c 652f 7061 7468')), [[':path', '/sample/path']]);
  assert.deepEqual(e.decode(hex('1008 7061 7373 776f 7264 0673 6563 7265 74')), [['password', 'secret']]);
  assert.deepEqual(e.decode(hex('82')), [[':method', 'GET']]);
  assert.equal(e.tableSize, 0, 'without indexing, never indexed and indexed fields leave the table alone');
});

test('RFC 7541 C.3: three requests without Huffman coding on one decoder', () => {
  checkSequence(
    new HpackDecoder(),
    [
      '8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
      '8286 84be 5808 6e6f 2d63 6163 6865',
      '8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65',
    ],
    REQUESTS,
    REQUEST_TABLES,
    REQUEST_TABLE_SIZES,
  );
});

test('RFC 7541 C.4: the same requests with Huffman coding', () => {
  checkSequence(
    new HpackDecoder(),
    [
      '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff',
      '8286 84be 5886 a8eb 1064 9cbf',
      '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf',
    ],
    REQUESTS,
    REQUEST_TABLES,
    REQUEST_TABLE_SIZES,
  );
});

test('RFC 7541 C.5: three responses without Huffman coding, 256-octet table with evictions', () => {
  checkSequence(
    new HpackDecoder(256),
    [
      '4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 ' +
        '2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
      '4803 3330 37c1 c0bf',
      '88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d ' +
        '54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 ' +
        '5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31',
    ],
    RESPONSES,
    RESPONSE_TABLES,
    RESPONSE_TABLE_SIZES,
  );
});

test('RFC 7541 C.6: the same responses with Huffman coding', () => {
  checkSequence(
    new HpackDecoder(256),
    [
      '4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 ' +
        '2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3',
      '4883 640e ffc1 c0bf',
      '88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab ' +
        '77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f ' +
        '9587 3160 65c0 03ed 4ee5 b106 3d50 07',
    ],
    RESPONSES,
    RESPONSE_TABLES,
    RESPONSE_TABLE_SIZES,
  );
});

test('Huffman: every octet decodes, alone, in sequence and at any offset', () => {
  const all = Buffer.alloc(256);
  for (let i = 0; i < 256; i++) all[i] = i;
  assert.equal(huffmanDecode(huffmanEncode(all), 0, huffmanEncode(all).length), all.toString('latin1'));
  for (let octet = 0; octet < 256; octet++) {
    const one = Buffer.from([octet]);
    const framed = Buffer.concat([Buffer.from([0xaa]), huffmanEncode(one), Buffer.from([0xbb])]);
    assert.equal(huffmanDecode(framed, 1, framed.length - 1), one.toString('latin1'), `octet ${octet}`);
  }
  let seed = 7;
  for (let round = 0; round < 200; round++) {
    const s = Buffer.alloc(round % 40);
    for (let i = 0; i < s.length; i++) s[i] = (seed = (seed * 1103515245 + 12345) & 0x7fffffff) >>> 23;
    const encoded = huffmanEncode(s);
    assert.equal(huffmanDecode(encoded, 0, encoded.length), s.toString('latin1'));
  }
  assert.equal(huffmanDecode(Buffer.alloc(0), 0, 0), '');
});

test('Huffman padding and EOS (RFC 7541 section 5.2)', () => {
  const decode = (octets: number[]): string => huffmanDecode(Buffer.from(octets), 0, octets.length);
  assert.equal(decode([0x1f]), 'a', "'a' is 00011, then 3 bits of padding");
  assert.equal(decode([0x18, 0xc6, 0x31, 0xff]), 'aaaaa', '25 bits of code, then 7 bits of padding');
  assert.throws(() => decode([0xff]), { name: 'HpackError', message: /more than 7 bits/ });
  assert.throws(() => decode([0x1f, 0xff]), { name: 'HpackError', message: /more than 7 bits/ });
  assert.throws(() => decode([0x1e]), { name: 'HpackError', message: /not EOS padding/ }, "'a' then 110");
  assert.throws(() => decode([0x18]), { name: 'HpackError', message: /not EOS padding/ }, "'a' then 000");
  assert.throws(() => decode([0xff, 0xff, 0xff, 0xfc]), { name: 'HpackError', message: /EOS/ }, 'EOS alone');
  assert.throws(() => decode([0x1f, 0xff, 0xff, 0xff, 0xe0]), { name: 'HpackError', message: /EOS/ }, "'a', EOS");
  // Through the decoder: a literal whose value has bad padding.
  assert.throws(() => new HpackDecoder().decode(Buffer.from([0x00, 0x81, 0x1f, 0x81, 0x1e])), HpackError);
  assert.deepEqual(new HpackDecoder().decode(Buffer.from([0x00, 0x81, 0x1f, 0x81, 0x1f])), [['a', 'a']]);
});

test('decoding errors are HpackError', () => {
  const fails = (octets: number[], message: RegExp, decoder = new HpackDecoder()): void => {
    assert.throws(() => decoder.decode(Buffer.from(octets)), (err: unknown) => {
      assert.ok(err instanceof HpackError, String(err));
      assert.match(err.message, message);
      return true;
    });
  };
  fails([0x80], /index 0/);
  fails([0xbe], /index 62 is not/, new HpackDecoder());
  fails([0x7e, 0x01, 0x61], /index 62 is not/, new HpackDecoder()); // literal with a dynamic name index
  fails([0xff, 0x80, 0xff, 0xff, 0xff, 0x07], /index 2147483647 is not/); // the largest integer, out of range
  fails([0xff, 0x81, 0xff, 0xff, 0xff, 0x07], /exceeds 2\^31/);
  fails([0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], /exceeds 2\^31/); // a 6th continuation octet
  fails([0x3f, 0xe2, 0x1f], /size update to 4097 exceeds our limit of 4096/);
  fails([0x82, 0x20], /after a header field/);
  fails([0xff], /ends inside an integer/);
  fails([0x0f, 0x80], /ends inside an integer/);
  fails([0x40], /ends before a string literal/);
  fails([0x04], /ends before a string literal/);
  fails([0x40, 0x0a, 0x61], /runs past the end/);
  fails([0x04, 0x7f, 0x01, 0x61], /runs past the end/); // 128-octet value, 1 present
  fails([0x40, 0x01, 0x61, 0x7f], /ends inside an integer/);
});

test('dynamic table size updates and oversize entries (RFC 7541 sections 4.3, 4.4, 6.3)', () => {
  const d = new HpackDecoder();
  d.decode(hex('8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d'));
  assert.equal(d.tableSize, 57);
  // Two updates at the start of a block (shrink to 0, then back up to the limit) empty the table.
  assert.deepEqual(d.decode(Buffer.from([0x20, 0x3f, 0xe1, 0x1f, 0x82])), [[':method', 'GET']]);
  assert.equal(d.tableSize, 0);
  assert.deepEqual(dynamicTable(d), []);

  const small = new HpackDecoder(100);
  small.decode(Buffer.from([0x40, 0x01, 0x61, 0x01, 0x62])); // a: b, 34 octets
  small.decode(Buffer.from([0x40, 0x01, 0x63, 0x01, 0x64])); // c: d, 34 octets
  assert.deepEqual(dynamicTable(small), [['c', 'd'], ['a', 'b']]);
  // Shrinking to 40 evicts the oldest entry only.
  assert.deepEqual(small.decode(Buffer.from([0x3f, 0x09, 0xbe])), [['c', 'd']]);
  assert.deepEqual(dynamicTable(small), [['c', 'd']]);
  // An entry larger than the table empties it and is not added, but is still emitted.
  const big = 'x'.repeat(20);
  assert.deepEqual(small.decode(Buffer.from([0x40, 0x01, 0x65, 0x14, ...Buffer.from(big)])), [['e', big]]);
  assert.equal(small.tableSize, 0);
  assert.deepEqual(dynamicTable(small), []);
  // The ring wraps: many insertions into a 256-octet table keep exactly the newest that fit.
  const ring = new HpackDecoder(256);
  for (let i = 0; i < 50; i++) ring.decode(Buffer.from([0x40, 0x02, 0x6b, 0x30 + (i % 10), 0x02, 0x76, 0x30 + (i % 10)]));
  assert.equal(ring.tableSize, 252); // 7 entries of 36 octets
  assert.deepEqual(
    dynamicTable(ring).map(([name]) => name),
    ['k9', 'k8', 'k7', 'k6', 'k5', 'k4', 'k3'],
  );
});

const PUSH_REQUEST: ReadonlyArray<readonly [string, string]> = [
  [':method', 'POST'],
  [':scheme', 'https'],
  [':authority', 'push.example.net'],
  [':path', '/wpush/v2/abc'],
  ['ttl', '60'],
  ['content-encoding', 'aes128gcm'],
  ['content-type', 'application/octet-stream'],
  ['content-length', '1234'],
  ['authorization', 'vapid t=eyJ..., k=BC...'],
  ['urgency', 'high'],
  ['topic', 'abc'],
];

test('encodeHeaders: exact representations (RFC 7541 sections 6.1 and 6.2.2)', () => {
  assert.deepEqual(encodeHeaders([[':method', 'POST']]), Buffer.from([0x83]));
  assert.deepEqual(encodeHeaders([[':path', '/x']]), Buffer.from([0x04, 0x02, 0x2f, 0x78]));
  assert.deepEqual(encodeHeaders([['accept', '']]), Buffer.from([0x93]), 'an empty value matches a static entry');
  assert.deepEqual(encodeHeaders([['content-type', 'a']]), Buffer.from([0x0f, 0x10, 0x01, 0x61]), 'name index 31 > 14');
  assert.deepEqual(encodeHeaders([['x-a', 'b']]), Buffer.from([0x00, 0x03, 0x78, 0x2d, 0x61, 0x01, 0x62]));
  assert.deepEqual(encodeHeaders([]), Buffer.alloc(0));
  const long = 'v'.repeat(200);
  assert.deepEqual(encodeHeaders([['ttl', long]]).subarray(0, 7), Buffer.from([0x00, 0x03, 0x74, 0x74, 0x6c, 0x7f, 0x49]));
});

test('encodeHeaders round-trips through HpackDecoder without touching its table', () => {
  const d = new HpackDecoder();
  const block = encodeHeaders(PUSH_REQUEST);
  assert.equal(block[0], 0x83);
  assert.deepEqual(d.decode(block), PUSH_REQUEST);
  assert.equal(d.tableSize, 0);
  const odd: Fields = [
    ['x-' + 'n'.repeat(300), 'v'.repeat(5000)],
    ['te', 'trailers'],
    [':status', '204'],
    ['accept-encoding', 'gzip, deflate'],
    ['accept-encoding', 'br'],
    ['x-latin1', '\u00e9\u00ff\u0080'],
  ];
  assert.deepEqual(d.decode(encodeHeaders(odd)), odd);
  // The plan scratch grows past its initial size.
  const many: Fields = Array.from({ length: 100 }, (_, i) => [`x-${i}`, String(i)]);
  assert.deepEqual(d.decode(encodeHeaders(many)), many);
});

// --- against node:http2 ------------------------------------------------------------------------------

const FRAME_HEADERS = 0x1;
const FRAME_RST_STREAM = 0x3;
const FRAME_SETTINGS = 0x4;
const FRAME_GOAWAY = 0x7;
const FRAME_CONTINUATION = 0x9;
const FLAG_END_STREAM = 0x1;
const FLAG_ACK = 0x1;
const FLAG_END_HEADERS = 0x4;
const FLAG_PADDED = 0x8;
const FLAG_PRIORITY = 0x20;

function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

/** Reads frames off a raw socket; resolves with the response header blocks in arrival order. */
function collectHeaderBlocks(socket: net.Socket, streams: number): Promise<Array<[number, Buffer]>> {
  return new Promise((resolve, reject) => {
    const blocks: Array<[number, Buffer]> = [];
    let pending = Buffer.alloc(0);
    let partial: { streamId: number; chunks: Buffer[] } | undefined;
    socket.on('error', reject);
    socket.on('close', () => reject(new Error(`connection closed after ${blocks.length} header blocks`)));
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 9) {
        const length = pending.readUIntBE(0, 3);
        if (pending.length < 9 + length) break;
        const type = pending[3]!;
        const flags = pending[4]!;
        const streamId = pending.readUInt32BE(5) & 0x7fffffff;
        let payload = pending.subarray(9, 9 + length);
        pending = pending.subarray(9 + length);
        if (type === FRAME_SETTINGS && (flags & FLAG_ACK) === 0) {
          socket.write(frame(FRAME_SETTINGS, FLAG_ACK, 0));
        } else if (type === FRAME_HEADERS || type === FRAME_CONTINUATION) {
          if (type === FRAME_HEADERS) {
            if ((flags & FLAG_PADDED) !== 0) payload = payload.subarray(1, payload.length - payload[0]!);
            if ((flags & FLAG_PRIORITY) !== 0) payload = payload.subarray(5);
            partial = { streamId, chunks: [] };
          }
          assert.ok(partial && partial.streamId === streamId, 'CONTINUATION of the open header block');
          partial.chunks.push(Buffer.from(payload));
          if ((flags & FLAG_END_HEADERS) !== 0) {
            blocks.push([streamId, Buffer.concat(partial.chunks)]);
            partial = undefined;
            if (blocks.length === streams) resolve(blocks);
          }
        } else if (type === FRAME_RST_STREAM || type === FRAME_GOAWAY) {
          reject(new Error(`server sent frame type ${type}: ${payload.toString('hex')}`));
        }
      }
    });
  });
}

test('interop with node:http2 (nghttp2): our request blocks decode there, its responses decode here', { timeout: 20_000 }, async () => {
  const DATE = 'Tue, 01 Jul 2025 12:00:00 GMT';
  const LOCATION = `https://push.example.net/m/${'0123456789abcdef'.repeat(5)}`.slice(0, 100);
  assert.equal(LOCATION.length, 100);
  const received: Array<Record<string, unknown>> = [];
  const server = http2.createServer();
  server.on('stream', (stream, headers) => {
    received.push({ ...headers });
    const n = received.length;
    stream.respond(
      {
        ':status': n === 1 ? 201 : 200,
        date: DATE,
        location: LOCATION,
        'retry-after': '120',
        'x-a': 'repeated across responses',
        'x-n': String(n),
      },
      { endStream: true },
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const socket = net.connect(port, '127.0.0.1');
  try {
    await once(socket, 'connect');
    const blocksPromise = collectHeaderBlocks(socket, 3);
    const push = PUSH_REQUEST.map(([name, value]): [string, string] =>
      // Without a body, nghttp2 would reset the stream for a content-length of 1234.
      [name, name === 'content-length' ? '0' : name === ':authority' ? `127.0.0.1:${port}` : value],
    );
    const get: Fields = [
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', `127.0.0.1:${port}`],
    ];
    socket.write(
      Buffer.concat([
        Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'),
        frame(FRAME_SETTINGS, 0, 0),
        frame(FRAME_HEADERS, FLAG_END_STREAM | FLAG_END_HEADERS, 1, encodeHeaders(push)),
        frame(FRAME_HEADERS, FLAG_END_STREAM | FLAG_END_HEADERS, 3, encodeHeaders(get)),
        frame(FRAME_HEADERS, FLAG_END_STREAM | FLAG_END_HEADERS, 5, encodeHeaders(get)),
      ]),
    );
    const blocks = await blocksPromise;

    // nghttp2 read our blocks exactly.
    assert.equal(received.length, 3);
    for (const [i, sent] of [push, get, get].entries()) {
      assert.deepEqual(Object.fromEntries(Object.entries(received[i]!)), Object.fromEntries(sent), `request ${i + 1}`);
    }

    const decoder = new HpackDecoder();
    assert.deepEqual(
      blocks.map(([streamId]) => streamId),
      [1, 3, 5],
    );
    blocks.forEach(([streamId, block], i) => {
      assert.deepEqual(
        decoder.decode(block),
        [
          [':status', i === 0 ? '201' : '200'],
          ['date', DATE],
          ['location', LOCATION],
          ['retry-after', '120'],
          ['x-a', 'repeated across responses'],
          ['x-n', String(i + 1)],
        ],
        `stream ${streamId}`,
      );
    });
    // The exchange exercised what it is meant to: Huffman-coded literals (the first block is shorter than its
    // raw literals), and in the later blocks fields from the dynamic table (0x88 is the static :status 200,
    // then `date` is dynamic). nghttp2 never indexes `location`, which stays a literal in every block.
    const [first, second, third] = blocks.map(([, block]) => block);
    assert.ok(first!.length < DATE.length + LOCATION.length + 'x-a'.length + 'repeated across responses'.length);
    for (const later of [second!, third!]) {
      assert.equal(later[0], 0x88);
      assert.ok(later[1]! >= 0xbe, later.toString('hex'));
      assert.ok(later.length < first!.length - 40, later.toString('hex'));
    }
    assert.ok(decoder.tableSize > 0);
  } finally {
    socket.destroy();
    server.close();
  }
});
