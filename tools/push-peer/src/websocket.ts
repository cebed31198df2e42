/**
 * The peer's browser face: Mozilla's WebPush WebSocket protocol (what Firefox speaks to the server
 * in its `dom.push.serverURL`, as autopush serves it): hello, register, unregister, notification
 * and ack. Each channel a browser registers gets an endpoint on the peer's HTTP push face; what
 * that face accepts is stored here and forwarded to the browser connected with the channel's UAID,
 * until the browser acknowledges it or its TTL runs out (store and forward, as a push service does).
 * Every message from the browser is checked strictly; anything off the protocol is recorded in
 * `protocolErrors` and closes the connection.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { performance } from 'node:perf_hooks';

import { WebSocketServer, type WebSocket } from 'ws';

import { base64url, decodeBase64url } from './crypto.js';

/** The WebSocket subprotocol Firefox asks for. */
const SUBPROTOCOL = 'push-notification';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Firefox refuses a UAID over 128 characters; autopush's are 32 hex digits. */
const UAID = /^[0-9a-f]{32}$/;
/** Ack codes (Firefox's kACK_STATUS_TO_CODE): delivered, decryption error, not delivered. */
const ACK_CODES: ReadonlySet<number> = new Set([100, 101, 102]);
/** Unregister reasons: manual, quota exceeded, permission revoked. */
const UNREGISTER_CODES: ReadonlySet<number> = new Set([200, 201, 202]);
/** Service worker delivery errors reported with nack: uncaught exception, unhandled rejection, internal error. */
const NACK_CODES: ReadonlySet<number> = new Set([301, 302, 303]);

const now = (): number => performance.timeOrigin + performance.now();

/** A channel a browser registered (PushManager.subscribe), and the endpoint it was given. */
export interface BrowserChannel {
  readonly uaid: string;
  readonly channelID: string;
  readonly endpoint: string;
  /** The register message's `key` (canonical unpadded base64url), or undefined when none was sent. */
  readonly applicationServerKey: string | undefined;
  /** `registered`, `unregistered` (the browser said so, with `unregisterCode`) or `dropped` (its UAID was rotated). */
  readonly state: 'registered' | 'unregistered' | 'dropped';
  readonly unregisterCode: number | undefined;
}

/** A push accepted for a browser channel, and what became of it. */
export interface BrowserMessage {
  /** The `version` the browser acknowledges it by (the HTTP face's message id). */
  readonly version: string;
  readonly endpoint: string;
  readonly channelID: string;
  readonly ttl: number;
  readonly topic: string | undefined;
  readonly bodyLength: number;
  /** When the HTTP face accepted it, and when it was last sent to the browser (undefined: not yet). */
  readonly at: number;
  readonly forwardedAt: number | undefined;
  /** The browser's ack: 100 delivered, 101 decryption error, 102 not delivered. */
  readonly ackCode: number | undefined;
  readonly ackedAt: number | undefined;
  /** The service worker's failure the browser reported with nack (301-303), if any. */
  readonly nackCode: number | undefined;
  /** A later message with the same Topic replaced it before it reached the browser. */
  readonly replaced: boolean;
}

interface Channel {
  readonly uaid: string;
  readonly channelID: string;
  readonly id: string;
  readonly applicationServerKey: string | undefined;
  state: BrowserChannel['state'];
  unregisterCode: number | undefined;
}

interface Message {
  readonly version: string;
  readonly channel: Channel;
  readonly data: string;
  readonly ttl: number;
  readonly topic: string | undefined;
  readonly bodyLength: number;
  readonly at: number;
  readonly storedUntil: number;
  forwardedAt: number | undefined;
  ackCode: number | undefined;
  ackedAt: number | undefined;
  nackCode: number | undefined;
  replaced: boolean;
}

/** A browser connected under a UAID, once its hello was answered. */
interface Connection {
  readonly socket: WebSocket;
  uaid: string | undefined;
}

export class BrowserFace {
  url = '';
  /** Every protocol violation a browser committed, in order. */
  readonly protocolErrors: string[] = [];
  /** The UAIDs handed out, in order (a rotation adds one per reconnecting browser). */
  readonly uaids: string[] = [];

  private server: Server | undefined;
  private sockets = new WebSocketServer({ noServer: true, handleProtocols: (offered) => (offered.has(SUBPROTOCOL) ? SUBPROTOCOL : false) });
  private readonly tcp = new Set<Socket>();
  private readonly channels = new Map<string, Channel>();
  private readonly byChannelID = new Map<string, Channel>();
  private readonly connected = new Map<string, Connection>();
  /** UAIDs whose browsers get a new one at their next hello (rotateUaids). */
  private readonly forgotten = new Set<string>();
  private messages: Message[] = [];

  /**
   * `endpointOf(id)` is the HTTP face's endpoint for a channel id (`<origin>/push/<id>`), known
   * only once that face listens.
   */
  constructor(
    private readonly host: string,
    private readonly endpointOf: (id: string) => string,
  ) {}

  async listen(port: number): Promise<void> {
    const server = createServer((_request, response) => {
      response.writeHead(426, { 'content-type': 'text/plain', upgrade: 'websocket' }).end(`upgrade to WebSocket (${SUBPROTOCOL})`);
    });
    server.on('connection', (socket: Socket) => {
      this.tcp.add(socket);
      socket.on('close', () => this.tcp.delete(socket));
    });
    server.on('upgrade', (request, socket, head) => {
      const offered = String(request.headers['sec-websocket-protocol'] ?? '')
        .split(',')
        .map((entry) => entry.trim());
      if (!offered.includes(SUBPROTOCOL)) {
        this.protocolErrors.push(`a WebSocket without the ${SUBPROTOCOL} subprotocol (offered: ${offered.join(', ') || 'none'})`);
        socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
        return;
      }
      this.sockets.handleUpgrade(request, socket, head, (webSocket) => this.accept(webSocket));
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, this.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const host = this.host.includes(':') ? `[${this.host}]` : this.host;
    this.url = `ws://${host}:${(server.address() as AddressInfo).port}/`;
  }

  async close(): Promise<void> {
    for (const { socket } of this.connected.values()) socket.terminate();
    for (const client of this.sockets.clients) client.terminate();
    for (const socket of this.tcp) socket.destroy();
    this.sockets.close();
    const server = this.server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The channel behind an endpoint id of the HTTP face, if a browser registered it. */
  channel(id: string): { readonly applicationServerKey: string | undefined; readonly gone: boolean } | undefined {
    const channel = this.channels.get(id);
    return channel && { applicationServerKey: channel.applicationServerKey, gone: channel.state !== 'registered' };
  }

  /**
   * A push the HTTP face accepted for a registered channel: stored until its TTL runs out and sent
   * to the browser now if it is connected (else when it next says hello). A TTL of 0 is never
   * stored: it reaches a connected browser or nobody (RFC 8030 section 5.2). A stored message not
   * yet sent with the same Topic is replaced (section 5.4).
   */
  store(id: string, version: string, body: Buffer, ttl: number, topic: string | undefined, at: number): void {
    const channel = this.channels.get(id);
    if (!channel) throw new Error(`no browser channel ${id}`);
    const connection = this.connected.get(channel.uaid);
    if (ttl === 0 && !connection) return;
    if (topic !== undefined) {
      for (const message of this.messages) {
        if (message.channel === channel && message.topic === topic && message.forwardedAt === undefined && !message.replaced) message.replaced = true;
      }
    }
    const message: Message = {
      version,
      channel,
      data: base64url(body),
      ttl,
      topic,
      bodyLength: body.length,
      at,
      storedUntil: at + ttl * 1000,
      forwardedAt: undefined,
      ackCode: undefined,
      ackedAt: undefined,
      nackCode: undefined,
      replaced: false,
    };
    this.messages.push(message);
    if (connection) this.forward(connection, message);
  }

  registered(): BrowserChannel[] {
    return [...this.channels.values()].map((channel) => ({
      uaid: channel.uaid,
      channelID: channel.channelID,
      endpoint: this.endpointOf(channel.id),
      applicationServerKey: channel.applicationServerKey,
      state: channel.state,
      unregisterCode: channel.unregisterCode,
    }));
  }

  /** The UAIDs of the browsers connected now (hello answered). */
  connectedUaids(): string[] {
    return [...this.connected.keys()];
  }

  sent(endpoint?: string): BrowserMessage[] {
    return this.messages
      .map((message) => ({
        version: message.version,
        endpoint: this.endpointOf(message.channel.id),
        channelID: message.channel.channelID,
        ttl: message.ttl,
        topic: message.topic,
        bodyLength: message.bodyLength,
        at: message.at,
        forwardedAt: message.forwardedAt,
        ackCode: message.ackCode,
        ackedAt: message.ackedAt,
        nackCode: message.nackCode,
        replaced: message.replaced,
      }))
      .filter((message) => endpoint === undefined || message.endpoint === endpoint);
  }

  /**
   * Forgets every UAID handed out so far and drops the connections: a reconnecting browser's hello
   * gets a new UAID, so Firefox drops its registrations and fires pushsubscriptionchange for each.
   * The old channels' endpoints answer 410 from now on, as a push service that lost the browser.
   */
  rotateUaids(): void {
    for (const uaid of this.uaids) this.forgotten.add(uaid);
    for (const channel of this.channels.values()) if (channel.state === 'registered') channel.state = 'dropped';
    // A reset, not a clean close: after a close frame Firefox did not reconnect within 30 seconds.
    for (const { socket } of [...this.connected.values()]) socket.terminate();
  }

  /** Forgets recorded messages (reset of the HTTP face); channels and connections stay. */
  reset(): void {
    this.messages = [];
    this.protocolErrors.length = 0;
  }

  // ---------------------------------------------------------------------------------------------

  private accept(socket: WebSocket): void {
    const connection: Connection = { socket, uaid: undefined };
    socket.on('message', (raw, isBinary) => {
      const problem = isBinary ? 'a binary frame' : this.receive(connection, raw.toString());
      if (problem !== undefined) {
        this.protocolErrors.push(problem);
        socket.close(1002, problem.slice(0, 120));
      }
    });
    socket.on('close', () => {
      if (connection.uaid !== undefined && this.connected.get(connection.uaid) === connection) this.connected.delete(connection.uaid);
    });
    socket.on('error', () => {});
  }

  private send(connection: Connection, message: object): void {
    connection.socket.send(JSON.stringify(message));
  }

  /** Handles one text message; returns what was wrong with it, if anything. */
  private receive(connection: Connection, text: string): string | undefined {
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      return `not JSON: ${text.slice(0, 80)}`;
    }
    if (typeof message !== 'object' || message === null || Array.isArray(message)) return `not a JSON object: ${text.slice(0, 80)}`;
    const fields = message as Record<string, unknown>;
    // Firefox's ping is an empty object; the answer is one too.
    if (Object.keys(fields).length === 0) {
      if (connection.uaid === undefined) return 'a ping before hello';
      this.send(connection, {});
      return undefined;
    }
    const type = fields['messageType'];
    if (connection.uaid === undefined) return type === 'hello' ? this.hello(connection, fields) : `${String(type)} before hello`;
    switch (type) {
      case 'register':
        return this.register(connection, fields);
      case 'unregister':
        return this.unregister(connection, fields);
      case 'ack':
        return this.ack(connection, fields);
      case 'nack':
        return this.nack(connection, fields);
      case 'broadcast_subscribe':
        return typeof fields['broadcasts'] === 'object' && fields['broadcasts'] !== null ? undefined : 'broadcast_subscribe without broadcasts';
      default:
        return `unknown messageType ${JSON.stringify(type)}`;
    }
  }

  private hello(connection: Connection, fields: Record<string, unknown>): string | undefined {
    if (fields['use_webpush'] !== true) return 'hello without use_webpush: true (this peer carries encrypted data only)';
    const broadcasts = fields['broadcasts'];
    if (broadcasts !== undefined && (typeof broadcasts !== 'object' || broadcasts === null || Array.isArray(broadcasts))) return 'hello with broadcasts that are not an object';
    const offered = fields['uaid'];
    if (offered !== undefined && (typeof offered !== 'string' || !UAID.test(offered))) return `hello with a malformed uaid ${JSON.stringify(offered)}`;
    // A UAID this peer knows (and has not forgotten) keeps its channels; any other gets a new one.
    const known = typeof offered === 'string' && this.uaids.includes(offered) && !this.forgotten.has(offered);
    const uaid = known ? offered : randomBytes(16).toString('hex');
    if (!known) this.uaids.push(uaid);
    this.connected.get(uaid)?.socket.close(1000, 'replaced by a newer connection');
    connection.uaid = uaid;
    this.connected.set(uaid, connection);
    this.send(connection, { messageType: 'hello', uaid, status: 200, use_webpush: true, broadcasts: {} });
    const nowMs = now();
    for (const message of this.messages) {
      if (message.channel.uaid === uaid && message.channel.state === 'registered' && message.ackCode === undefined && !message.replaced && message.storedUntil > nowMs) {
        this.forward(connection, message);
      }
    }
    return undefined;
  }

  private register(connection: Connection, fields: Record<string, unknown>): string | undefined {
    const channelID = fields['channelID'];
    if (typeof channelID !== 'string' || !UUID.test(channelID)) return `register with a channelID that is not a UUID: ${JSON.stringify(channelID)}`;
    let applicationServerKey: string | undefined;
    const key = fields['key'];
    if (key !== undefined) {
      // Firefox pads it ("the Push server requires padding"): base64url, '=' up to a multiple of 4.
      const unpadded = typeof key === 'string' && key.length % 4 === 0 ? key.replace(/={1,2}$/, '') : undefined;
      const bytes = unpadded === undefined ? undefined : decodeBase64url(unpadded);
      if (!bytes || bytes.length !== 65 || bytes[0] !== 0x04) return `register with a key that is not a padded base64url P-256 point: ${JSON.stringify(key).slice(0, 100)}`;
      applicationServerKey = unpadded;
    }
    // Firefox sends a register again when its reply did not come in time (dom.push.requestTimeout):
    // it reconnects and repeats its pending requests. Like autopush, whose endpoint is derived from
    // the UAID and the channelID, the same registration gets the same endpoint; a different key for
    // a live channelID is a client error.
    const earlier = this.byChannelID.get(channelID.toLowerCase());
    if (earlier && earlier.uaid === connection.uaid && earlier.state === 'registered') {
      if (earlier.applicationServerKey !== applicationServerKey) return `register of channelID ${channelID} again with another key`;
      this.send(connection, { messageType: 'register', channelID, status: 200, pushEndpoint: this.endpointOf(earlier.id) });
      return undefined;
    }
    const channel: Channel = { uaid: connection.uaid!, channelID, id: `w${randomUUID().replace(/-/g, '')}`, applicationServerKey, state: 'registered', unregisterCode: undefined };
    this.channels.set(channel.id, channel);
    this.byChannelID.set(channelID.toLowerCase(), channel);
    this.send(connection, { messageType: 'register', channelID, status: 200, pushEndpoint: this.endpointOf(channel.id) });
    return undefined;
  }

  /** The browser's own channel by channelID (case-insensitive, as Firefox matches replies). */
  private own(connection: Connection, channelID: unknown): Channel | undefined {
    const channel = typeof channelID === 'string' ? this.byChannelID.get(channelID.toLowerCase()) : undefined;
    return channel?.uaid === connection.uaid ? channel : undefined;
  }

  private unregister(connection: Connection, fields: Record<string, unknown>): string | undefined {
    const channelID = fields['channelID'];
    const code = fields['code'];
    if (typeof code !== 'number' || !UNREGISTER_CODES.has(code)) return `unregister with code ${JSON.stringify(code)} (200, 201 or 202)`;
    const channel = this.own(connection, channelID);
    if (!channel) return `unregister of a channel this browser does not have: ${JSON.stringify(channelID)}`;
    channel.state = 'unregistered';
    channel.unregisterCode = code;
    this.send(connection, { messageType: 'unregister', channelID, status: 200 });
    return undefined;
  }

  private ack(connection: Connection, fields: Record<string, unknown>): string | undefined {
    const updates = fields['updates'];
    if (!Array.isArray(updates) || updates.length === 0) return 'ack without updates';
    for (const update of updates as unknown[]) {
      const { channelID, version, code } = (update ?? {}) as Record<string, unknown>;
      const channel = this.own(connection, channelID);
      if (!channel) return `ack for a channel this browser does not have: ${JSON.stringify(channelID)}`;
      if (typeof code !== 'number' || !ACK_CODES.has(code)) return `ack with code ${JSON.stringify(code)} (100, 101 or 102)`;
      const message = this.messages.find((entry) => entry.channel === channel && entry.version === version);
      if (!message || message.forwardedAt === undefined) return `ack of version ${JSON.stringify(version)} never sent on channel ${channel.channelID}`;
      if (message.ackCode !== undefined) return `second ack of version ${message.version}`;
      message.ackCode = code;
      message.ackedAt = now();
    }
    return undefined;
  }

  private nack(connection: Connection, fields: Record<string, unknown>): string | undefined {
    const { version, code } = fields;
    if (typeof code !== 'number' || !NACK_CODES.has(code)) return `nack with code ${JSON.stringify(code)} (301, 302 or 303)`;
    const message = this.messages.find((entry) => entry.version === version && entry.channel.uaid === connection.uaid);
    if (!message) return `nack of a version never sent to this browser: ${JSON.stringify(version)}`;
    message.nackCode = code;
    return undefined;
  }

  private forward(connection: Connection, message: Message): void {
    message.forwardedAt = now();
    const ttl = Math.max(0, Math.ceil((message.storedUntil - message.forwardedAt) / 1000));
    this.send(connection, {
      messageType: 'notification',
      channelID: message.channel.channelID,
      version: message.version,
      ttl,
      data: message.data,
      headers: { encoding: 'aes128gcm' },
    });
  }
}
