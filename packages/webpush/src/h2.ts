/**
 * A lean HTTP/2 client connection (RFC 9113) for push requests: POST with a small body, a small answer.
 *
 * Why not `node:http2`: per request it builds a stream object, an AsyncResource with deprecation-wrapped
 * accessors and several event emitters, which cost about as much CPU as the rest of sending a push minus
 * the ECDH. Here a request is one HEADERS and one DATA frame written into a shared buffer that is flushed
 * once per event-loop turn, and a response is decoded straight off the socket into callbacks.
 *
 * What it implements: the client preface and SETTINGS (push disabled, the largest receive windows, so the
 * peer is never throttled by us), send-side flow control (connection and stream windows, the peer's
 * MAX_FRAME_SIZE), HPACK (never-indexing encoder, full decoder), PING both ways, RST_STREAM, GOAWAY
 * (streams above the last processed id come back as REFUSED_STREAM, which the caller may re-send), and
 * connection errors answered with GOAWAY. Server push is refused as the protocol error it is.
 */
import type { Duplex } from 'node:stream';

import { encodeHeaders, HpackDecoder, HpackError } from './hpack.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const FRAME_HEADER = 9;

const enum FrameType {
  DATA = 0x0,
  HEADERS = 0x1,
  RST_STREAM = 0x3,
  SETTINGS = 0x4,
  PUSH_PROMISE = 0x5,
  PING = 0x6,
  GOAWAY = 0x7,
  WINDOW_UPDATE = 0x8,
  CONTINUATION = 0x9,
}

const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const PRIORITY = 0x20;

/** RFC 9113 section 7 error codes. */
export const H2_NO_ERROR = 0x0;
const H2_PROTOCOL_ERROR = 0x1;
const H2_FLOW_CONTROL_ERROR = 0x3;
const H2_FRAME_SIZE_ERROR = 0x6;
export const H2_REFUSED_STREAM = 0x7;
const H2_CANCEL = 0x8;
const H2_COMPRESSION_ERROR = 0x9;

const SETTINGS_ENABLE_PUSH = 0x2;
const SETTINGS_MAX_CONCURRENT_STREAMS = 0x3;
const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
const SETTINGS_MAX_FRAME_SIZE = 0x5;

const MAX_WINDOW = 2 ** 31 - 1;
const DEFAULT_WINDOW = 65_535;
/** The frame size we accept (the protocol default; we never raise it). */
const MAX_FRAME_SIZE = 16_384;
/** The HPACK table size we accept from the peer (the protocol default). */
const HEADER_TABLE_SIZE = 4_096;
const MAX_STREAM_ID = 2 ** 31 - 1;
/** A header block (HEADERS plus CONTINUATION) larger than this is refused rather than buffered. */
const MAX_HEADER_BLOCK = 64 * 1024;

/** What the connection tells the request that owns a stream. */
export interface StreamHandlers {
  /** The final (non-1xx) response header; `fields` excludes pseudo-headers. */
  onResponse(status: number, fields: ReadonlyArray<[string, string]>): void;
  onData(chunk: Buffer): void;
  /**
   * The stream is over. `code` is H2_NO_ERROR after a complete response, else the peer's RST_STREAM code
   * (H2_REFUSED_STREAM also for streams a GOAWAY left unprocessed); `error` is set when the connection
   * failed under the stream.
   */
  onClose(code: number, error?: Error): void;
}

export interface ConnectionEvents {
  /** The peer's first SETTINGS arrived: the connection takes requests. */
  onReady(): void;
  /** The peer changed SETTINGS_MAX_CONCURRENT_STREAMS. */
  onStreamLimit(limit: number): void;
  /** The peer sent GOAWAY, or stream ids ran out: no new streams on this connection. */
  onGoaway(): void;
  /** The transport is gone; `error` is undefined after a clean close. */
  onClose(error: Error | undefined): void;
}

interface Stream {
  readonly id: number;
  readonly handlers: StreamHandlers;
  sendWindow: number;
  /** Body bytes not yet sent (flow control held them back). */
  body: Buffer | undefined;
  bodyOffset: number;
  responded: boolean;
}

class H2ProtocolError extends Error {
  constructor(
    message: string,
    readonly h2Code: number,
  ) {
    super(message);
    this.name = 'H2ProtocolError';
  }
}

export class H2Connection {
  /** The peer's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until it says otherwise). */
  peerStreamLimit = Infinity;
  /** True once no new stream may start here (GOAWAY either way, close, or failure). */
  draining = false;
  closed = false;
  /** Settles once the transport is gone. */
  readonly done: Promise<void>;

  private settle!: () => void;
  /** Our side of the transport is ended: nothing more may be written. */
  private ended = false;
  private readonly streams = new Map<number, Stream>();
  private readonly decoder = new HpackDecoder(HEADER_TABLE_SIZE);
  private nextStreamId = 1;
  private ready = false;
  private out: Buffer[] = [];
  private flushScheduled = false;
  private inbox: Buffer | undefined;
  private connectionSendWindow = DEFAULT_WINDOW;
  private peerInitialWindow = DEFAULT_WINDOW;
  private peerMaxFrame = MAX_FRAME_SIZE;
  /** Received flow-controlled bytes not yet given back with WINDOW_UPDATE. */
  private unacknowledged = 0;
  /** Streams with body bytes waiting for window. */
  private readonly blocked = new Set<Stream>();
  /** A header block being continued: the stream it belongs to and its fragments so far. */
  private continuation: { streamId: number; endStream: boolean; parts: Buffer[]; size: number } | undefined;
  private readonly pings = new Map<bigint, (error: Error | null) => void>();
  private pingCounter = 0n;

  constructor(
    private readonly socket: Duplex,
    private readonly authority: string,
    private readonly scheme: 'https' | 'http',
    private readonly events: ConnectionEvents,
  ) {
    const settings = Buffer.alloc(FRAME_HEADER + 12);
    writeFrameHeader(settings, 0, 12, FrameType.SETTINGS, 0, 0);
    settings.writeUInt16BE(SETTINGS_ENABLE_PUSH, 9);
    settings.writeUInt32BE(0, 11);
    settings.writeUInt16BE(SETTINGS_INITIAL_WINDOW_SIZE, 15);
    settings.writeUInt32BE(MAX_WINDOW, 17);
    this.done = new Promise((resolve) => {
      this.settle = resolve;
    });
    this.queue(PREFACE);
    this.queue(settings);
    this.queue(windowUpdate(0, MAX_WINDOW - DEFAULT_WINDOW));
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('error', (err: Error) => this.fail(err));
    socket.on('close', () => this.fail(undefined));
  }

  /** Opens a stream: a POST of `body`. Throws when the connection takes no new streams. */
  request(path: string, fields: ReadonlyArray<readonly [string, string]>, body: Buffer, handlers: StreamHandlers): number {
    if (this.draining || !this.ready) throw new Error('the HTTP/2 connection takes no new streams');
    const id = this.nextStreamId;
    this.nextStreamId += 2;
    if (this.nextStreamId > MAX_STREAM_ID) this.startDraining();
    const block = encodeHeaders([[':method', 'POST'], [':scheme', this.scheme], [':authority', this.authority], [':path', path], ...fields]);
    if (block.length > this.peerMaxFrame) throw new RangeError('request header block larger than one frame');
    const stream: Stream = { id, handlers, sendWindow: this.peerInitialWindow, body: undefined, bodyOffset: 0, responded: false };
    this.streams.set(id, stream);
    const fits = body.length <= this.peerMaxFrame && body.length <= stream.sendWindow && body.length <= this.connectionSendWindow;
    if (fits) {
      // The common case: HEADERS and the whole body as one DATA frame, in one buffer.
      const frame = Buffer.allocUnsafe(FRAME_HEADER * 2 + block.length + body.length);
      writeFrameHeader(frame, 0, block.length, FrameType.HEADERS, END_HEADERS, id);
      block.copy(frame, FRAME_HEADER);
      const dataAt = FRAME_HEADER + block.length;
      writeFrameHeader(frame, dataAt, body.length, FrameType.DATA, END_STREAM, id);
      body.copy(frame, dataAt + FRAME_HEADER);
      stream.sendWindow -= body.length;
      this.connectionSendWindow -= body.length;
      this.queue(frame);
    } else {
      const frame = Buffer.allocUnsafe(FRAME_HEADER + block.length);
      writeFrameHeader(frame, 0, block.length, FrameType.HEADERS, END_HEADERS, id);
      block.copy(frame, FRAME_HEADER);
      this.queue(frame);
      stream.body = body;
      this.blocked.add(stream);
      this.sendBlocked();
    }
    return id;
  }

  /** Abandons a stream (a timeout): RST_STREAM CANCEL; its handlers hear nothing more. */
  cancel(id: number): void {
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    this.forget(stream);
    if (!this.closed) this.queue(rstStream(id, H2_CANCEL));
    this.closeIfDrained();
  }

  /** Sends a PING; `done` hears null on the ACK or an error when the connection goes first. False if closed. */
  ping(done: (error: Error | null) => void): boolean {
    if (this.closed) return false;
    const payload = ++this.pingCounter;
    this.pings.set(payload, done);
    const frame = Buffer.alloc(FRAME_HEADER + 8);
    writeFrameHeader(frame, 0, 8, FrameType.PING, 0, 0);
    frame.writeBigUInt64BE(payload, FRAME_HEADER);
    this.queue(frame);
    return true;
  }

  /** No new streams; streams in flight finish, then the transport closes. */
  close(): void {
    if (this.closed) return;
    if (!this.draining) {
      this.queue(goaway(0, H2_NO_ERROR));
      this.startDraining();
    }
    this.closeIfDrained();
  }

  /** Tears the connection down now: streams in flight fail with `error`. */
  destroy(error: Error): void {
    this.fail(error);
  }

  // --- writing --------------------------------------------------------------------------------------------

  private queue(frame: Buffer): void {
    if (this.ended) return;
    this.out.push(frame);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      // Once per event-loop turn: every request issued while handling a batch of responses shares a write.
      setImmediate(this.flush);
    }
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    if (this.closed || this.ended || this.out.length === 0) {
      this.out = [];
      return;
    }
    const frames = this.out;
    this.out = [];
    this.socket.write(frames.length === 1 ? (frames[0] as Buffer) : Buffer.concat(frames));
  };

  /** Sends what flow control now allows of bodies held back. */
  private sendBlocked(): void {
    for (const stream of this.blocked) {
      const body = stream.body as Buffer;
      while (stream.bodyOffset < body.length) {
        const size = Math.min(body.length - stream.bodyOffset, this.peerMaxFrame, stream.sendWindow, this.connectionSendWindow);
        if (size <= 0) break;
        const end = stream.bodyOffset + size;
        const frame = Buffer.allocUnsafe(FRAME_HEADER + size);
        writeFrameHeader(frame, 0, size, FrameType.DATA, end === body.length ? END_STREAM : 0, stream.id);
        body.copy(frame, FRAME_HEADER, stream.bodyOffset, end);
        stream.bodyOffset = end;
        stream.sendWindow -= size;
        this.connectionSendWindow -= size;
        this.queue(frame);
      }
      if (stream.bodyOffset === body.length) {
        stream.body = undefined;
        this.blocked.delete(stream);
      }
      if (this.connectionSendWindow <= 0) return;
    }
  }

  // --- reading --------------------------------------------------------------------------------------------

  private receive(chunk: Buffer): void {
    let data = this.inbox === undefined ? chunk : Buffer.concat([this.inbox, chunk]);
    this.inbox = undefined;
    let offset = 0;
    try {
      while (!this.closed && data.length - offset >= FRAME_HEADER) {
        const length = data.readUIntBE(offset, 3);
        if (length > MAX_FRAME_SIZE) throw new H2ProtocolError(`frame of ${length} bytes exceeds ${MAX_FRAME_SIZE}`, H2_FRAME_SIZE_ERROR);
        if (data.length - offset < FRAME_HEADER + length) break;
        const type = data[offset + 3] as number;
        const flags = data[offset + 4] as number;
        const streamId = data.readUInt32BE(offset + 5) & 0x7fffffff;
        const payload = data.subarray(offset + FRAME_HEADER, offset + FRAME_HEADER + length);
        offset += FRAME_HEADER + length;
        this.frame(type, flags, streamId, payload);
      }
    } catch (err) {
      this.connectionError(err);
      return;
    }
    if (offset < data.length && !this.closed) {
      data = data.subarray(offset);
      // Keep a copy: the socket's chunk may be reused after this callback.
      this.inbox = Buffer.from(data);
    }
  }

  private frame(type: number, flags: number, streamId: number, payload: Buffer): void {
    if (this.continuation !== undefined && type !== FrameType.CONTINUATION) {
      throw new H2ProtocolError('a header block was interrupted by another frame', H2_PROTOCOL_ERROR);
    }
    switch (type) {
      case FrameType.DATA:
        return this.onData(flags, streamId, payload);
      case FrameType.HEADERS:
        return this.onHeaders(flags, streamId, payload);
      case FrameType.CONTINUATION:
        return this.onContinuation(flags, streamId, payload);
      case FrameType.RST_STREAM:
        return this.onReset(streamId, payload);
      case FrameType.SETTINGS:
        return this.onSettings(flags, streamId, payload);
      case FrameType.PING:
        return this.onPing(flags, streamId, payload);
      case FrameType.GOAWAY:
        return this.onGoaway(streamId, payload);
      case FrameType.WINDOW_UPDATE:
        return this.onWindowUpdate(streamId, payload);
      case FrameType.PUSH_PROMISE:
        throw new H2ProtocolError('PUSH_PROMISE although push is disabled', H2_PROTOCOL_ERROR);
      default:
        return; // PRIORITY and unknown frame types are ignored (RFC 9113 sections 4.1, 5.3.2)
    }
  }

  private onData(flags: number, streamId: number, payload: Buffer): void {
    if (streamId === 0) throw new H2ProtocolError('DATA on stream 0', H2_PROTOCOL_ERROR);
    // Flow control counts the whole frame, padding included; give it back in large steps.
    this.unacknowledged += payload.length;
    if (this.unacknowledged >= MAX_WINDOW / 2) {
      this.queue(windowUpdate(0, this.unacknowledged));
      this.unacknowledged = 0;
    }
    const stream = this.streams.get(streamId);
    if (stream === undefined) return; // cancelled by us, or already over
    if (!stream.responded) throw new H2ProtocolError('DATA before the response header', H2_PROTOCOL_ERROR);
    const data = unpad(flags, payload);
    if (data.length > 0) stream.handlers.onData(data);
    if ((flags & END_STREAM) !== 0) this.finish(stream, H2_NO_ERROR);
  }

  private onHeaders(flags: number, streamId: number, payload: Buffer): void {
    if (streamId === 0) throw new H2ProtocolError('HEADERS on stream 0', H2_PROTOCOL_ERROR);
    let fragment = unpad(flags, payload);
    if ((flags & PRIORITY) !== 0) {
      if (fragment.length < 5) throw new H2ProtocolError('HEADERS too short for its priority fields', H2_FRAME_SIZE_ERROR);
      fragment = fragment.subarray(5);
    }
    const endStream = (flags & END_STREAM) !== 0;
    if ((flags & END_HEADERS) !== 0) {
      this.headerBlock(streamId, endStream, fragment);
      return;
    }
    this.continuation = { streamId, endStream, parts: [Buffer.from(fragment)], size: fragment.length };
  }

  private onContinuation(flags: number, streamId: number, payload: Buffer): void {
    const pending = this.continuation;
    if (pending === undefined || pending.streamId !== streamId) throw new H2ProtocolError('CONTINUATION without a header block', H2_PROTOCOL_ERROR);
    pending.size += payload.length;
    if (pending.size > MAX_HEADER_BLOCK) throw new H2ProtocolError(`header block over ${MAX_HEADER_BLOCK} bytes`, H2_PROTOCOL_ERROR);
    pending.parts.push(Buffer.from(payload));
    if ((flags & END_HEADERS) === 0) return;
    this.continuation = undefined;
    this.headerBlock(streamId, pending.endStream, Buffer.concat(pending.parts));
  }

  private headerBlock(streamId: number, endStream: boolean, block: Buffer): void {
    // Decoded even for streams we no longer track: the HPACK table must follow every block.
    let fields: Array<[string, string]>;
    try {
      fields = this.decoder.decode(block);
    } catch (err) {
      if (err instanceof HpackError) throw new H2ProtocolError(`HPACK: ${err.message}`, H2_COMPRESSION_ERROR);
      throw err;
    }
    const stream = this.streams.get(streamId);
    if (stream === undefined) return;
    if (!stream.responded) {
      let status = 0;
      const regular: Array<[string, string]> = [];
      for (const field of fields) {
        if (field[0] === ':status') status = Number(field[1]);
        else if (field[0].charCodeAt(0) !== 0x3a) regular.push(field);
      }
      if (!Number.isInteger(status) || status < 100 || status > 999) {
        throw new H2ProtocolError(`response without a valid :status on stream ${streamId}`, H2_PROTOCOL_ERROR);
      }
      if (status >= 200) {
        stream.responded = true;
        stream.handlers.onResponse(status, regular);
      } else if (endStream) {
        throw new H2ProtocolError('an informational response ended the stream', H2_PROTOCOL_ERROR);
      }
    }
    // A HEADERS after the response is a trailer block: nothing in it matters to a push.
    if (endStream) this.finish(stream, H2_NO_ERROR);
  }

  private onReset(streamId: number, payload: Buffer): void {
    if (streamId === 0) throw new H2ProtocolError('RST_STREAM on stream 0', H2_PROTOCOL_ERROR);
    if (payload.length !== 4) throw new H2ProtocolError('RST_STREAM of the wrong size', H2_FRAME_SIZE_ERROR);
    const stream = this.streams.get(streamId);
    if (stream !== undefined) this.finish(stream, payload.readUInt32BE(0));
  }

  private onSettings(flags: number, streamId: number, payload: Buffer): void {
    if (streamId !== 0) throw new H2ProtocolError('SETTINGS on a stream', H2_PROTOCOL_ERROR);
    if ((flags & ACK) !== 0) {
      if (payload.length !== 0) throw new H2ProtocolError('SETTINGS ACK with a payload', H2_FRAME_SIZE_ERROR);
      return;
    }
    if (payload.length % 6 !== 0) throw new H2ProtocolError('SETTINGS of the wrong size', H2_FRAME_SIZE_ERROR);
    let limitChanged = false;
    for (let at = 0; at < payload.length; at += 6) {
      const id = payload.readUInt16BE(at);
      const value = payload.readUInt32BE(at + 2);
      if (id === SETTINGS_MAX_CONCURRENT_STREAMS) {
        this.peerStreamLimit = value;
        limitChanged = true;
      } else if (id === SETTINGS_INITIAL_WINDOW_SIZE) {
        if (value > MAX_WINDOW) throw new H2ProtocolError('SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1', H2_FLOW_CONTROL_ERROR);
        const delta = value - this.peerInitialWindow;
        this.peerInitialWindow = value;
        for (const stream of this.streams.values()) stream.sendWindow += delta;
      } else if (id === SETTINGS_MAX_FRAME_SIZE) {
        if (value < MAX_FRAME_SIZE || value > 16_777_215) throw new H2ProtocolError('SETTINGS_MAX_FRAME_SIZE out of range', H2_PROTOCOL_ERROR);
        this.peerMaxFrame = value;
      } else if (id === SETTINGS_ENABLE_PUSH && value > 1) {
        throw new H2ProtocolError('SETTINGS_ENABLE_PUSH other than 0 or 1', H2_PROTOCOL_ERROR);
      }
      // SETTINGS_HEADER_TABLE_SIZE does not matter: the encoder never uses the dynamic table.
    }
    const ack = Buffer.alloc(FRAME_HEADER);
    writeFrameHeader(ack, 0, 0, FrameType.SETTINGS, ACK, 0);
    this.queue(ack);
    this.sendBlocked();
    if (!this.ready) {
      this.ready = true;
      this.events.onReady();
    } else if (limitChanged) {
      this.events.onStreamLimit(this.peerStreamLimit);
    }
  }

  private onPing(flags: number, streamId: number, payload: Buffer): void {
    if (streamId !== 0) throw new H2ProtocolError('PING on a stream', H2_PROTOCOL_ERROR);
    if (payload.length !== 8) throw new H2ProtocolError('PING of the wrong size', H2_FRAME_SIZE_ERROR);
    if ((flags & ACK) !== 0) {
      const key = payload.readBigUInt64BE(0);
      const done = this.pings.get(key);
      this.pings.delete(key);
      done?.(null);
      return;
    }
    const ack = Buffer.allocUnsafe(FRAME_HEADER + 8);
    writeFrameHeader(ack, 0, 8, FrameType.PING, ACK, 0);
    payload.copy(ack, FRAME_HEADER);
    this.queue(ack);
  }

  private onGoaway(streamId: number, payload: Buffer): void {
    if (streamId !== 0) throw new H2ProtocolError('GOAWAY on a stream', H2_PROTOCOL_ERROR);
    if (payload.length < 8) throw new H2ProtocolError('GOAWAY too short', H2_FRAME_SIZE_ERROR);
    const lastStreamId = payload.readUInt32BE(0) & 0x7fffffff;
    // Draining first: the refused streams' owners re-send at once, and must not pick this connection.
    this.startDraining();
    // Streams above the last id were never processed: safe to send again elsewhere.
    for (const stream of [...this.streams.values()]) if (stream.id > lastStreamId) this.finish(stream, H2_REFUSED_STREAM);
    this.closeIfDrained();
  }

  private onWindowUpdate(streamId: number, payload: Buffer): void {
    if (payload.length !== 4) throw new H2ProtocolError('WINDOW_UPDATE of the wrong size', H2_FRAME_SIZE_ERROR);
    const increment = payload.readUInt32BE(0) & 0x7fffffff;
    if (streamId === 0) {
      if (increment === 0) throw new H2ProtocolError('WINDOW_UPDATE of 0 on the connection', H2_PROTOCOL_ERROR);
      this.connectionSendWindow += increment;
      if (this.connectionSendWindow > MAX_WINDOW) throw new H2ProtocolError('connection window above 2^31-1', H2_FLOW_CONTROL_ERROR);
    } else {
      const stream = this.streams.get(streamId);
      if (stream === undefined) return;
      if (increment === 0 || stream.sendWindow + increment > MAX_WINDOW) {
        // A stream error (RFC 9113 section 6.9): reset that stream only.
        this.queue(rstStream(streamId, increment === 0 ? H2_PROTOCOL_ERROR : H2_FLOW_CONTROL_ERROR));
        this.finish(stream, H2_PROTOCOL_ERROR);
        return;
      }
      stream.sendWindow += increment;
    }
    this.sendBlocked();
  }

  // --- stream and connection lifecycle --------------------------------------------------------------------

  private forget(stream: Stream): void {
    this.streams.delete(stream.id);
    this.blocked.delete(stream);
  }

  private finish(stream: Stream, code: number): void {
    this.forget(stream);
    stream.handlers.onClose(code);
    this.closeIfDrained();
  }

  private startDraining(): void {
    if (this.draining) return;
    this.draining = true;
    this.events.onGoaway();
  }

  private closeIfDrained(): void {
    if (this.draining && this.streams.size === 0 && !this.closed && !this.ended) {
      this.flush();
      this.ended = true;
      // Closed once our last bytes are out: a peer that keeps its half open must not hold us.
      this.socket.end(() => this.socket.destroy());
    }
  }

  private connectionError(err: unknown): void {
    const code = err instanceof H2ProtocolError ? err.h2Code : H2_PROTOCOL_ERROR;
    this.out = [];
    if (!this.ended) {
      // Tell the peer why (RFC 9113 section 5.4.1), then give the GOAWAY a moment to leave.
      this.ended = true;
      this.socket.end(goaway(0, code));
      const socket = this.socket;
      setTimeout(() => socket.destroy(), 1_000).unref();
    }
    this.fail(err instanceof Error ? err : new Error(String(err)), false);
  }

  /** The transport is gone (or must go): every stream and ping fails, then the owner hears once. */
  private fail(error: Error | undefined, destroySocket = true): void {
    if (this.closed) return;
    this.closed = true;
    this.draining = true;
    this.out = [];
    const streams = [...this.streams.values()];
    this.streams.clear();
    this.blocked.clear();
    const streamError = error ?? new Error('the HTTP/2 connection closed');
    for (const stream of streams) stream.handlers.onClose(-1, streamError);
    for (const done of this.pings.values()) done(streamError);
    this.pings.clear();
    if (destroySocket) this.socket.destroy();
    this.events.onClose(error);
    this.settle();
  }
}

function writeFrameHeader(buffer: Buffer, at: number, length: number, type: number, flags: number, streamId: number): void {
  buffer.writeUIntBE(length, at, 3);
  buffer[at + 3] = type;
  buffer[at + 4] = flags;
  buffer.writeUInt32BE(streamId, at + 5);
}

function windowUpdate(streamId: number, increment: number): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER + 4);
  writeFrameHeader(frame, 0, 4, FrameType.WINDOW_UPDATE, 0, streamId);
  frame.writeUInt32BE(increment, FRAME_HEADER);
  return frame;
}

function rstStream(streamId: number, code: number): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER + 4);
  writeFrameHeader(frame, 0, 4, FrameType.RST_STREAM, 0, streamId);
  frame.writeUInt32BE(code, FRAME_HEADER);
  return frame;
}

function goaway(lastStreamId: number, code: number): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER + 8);
  writeFrameHeader(frame, 0, 8, FrameType.GOAWAY, 0, 0);
  frame.writeUInt32BE(lastStreamId, FRAME_HEADER);
  frame.writeUInt32BE(code, FRAME_HEADER + 4);
  return frame;
}

/** The payload without its padding (RFC 9113 section 6.1), for frames that may be PADDED. */
function unpad(flags: number, payload: Buffer): Buffer {
  if ((flags & PADDED) === 0) return payload;
  if (payload.length < 1) throw new H2ProtocolError('padded frame without a pad length', H2_FRAME_SIZE_ERROR);
  const padding = payload[0] as number;
  if (padding >= payload.length) throw new H2ProtocolError('padding longer than the frame', H2_PROTOCOL_ERROR);
  return payload.subarray(1, payload.length - padding);
}
