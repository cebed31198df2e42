/**
 * A strict Slack Web API peer: a real HTTP server answering the methods Herald calls (auth.test,
 * chat.postMessage, chat.update, chat.postEphemeral, conversations.open, views.open) the way Slack
 * does. It checks the bearer token, the method, the encodings Slack accepts (form fields with
 * JSON-encoded blocks, or JSON with the token in the header) and the Block Kit it is given (block
 * and element types, their fields, text lengths, action_id/value limits, <= 50 blocks, <= 25
 * elements per actions block), answers a bad call `{ ok: false, error }` as Slack does, answers 429
 * with Retry-After when a test asks, and records every call. It also signs interaction requests as
 * Slack does (form-encoded payload, X-Slack-Request-Timestamp and X-Slack-Signature v0).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SlackTeam {
  teamId: string;
  teamName: string;
  botToken: string;
  botUserId: string;
  signingSecret: string;
}

export interface SlackCall {
  method: string;
  /** The team whose bot token made the call. */
  teamId: string;
  args: Record<string, unknown>;
  /** What the peer answered. */
  response: Record<string, unknown>;
  at: number;
}

export interface SlackPeer {
  /** The Web API base, as SLACK_API_URL: http://127.0.0.1:<port>/api/ */
  apiUrl: string;
  /** A Slack team with an installed app: its bot token, bot user and signing secret, and its channels. */
  addTeam(channels?: string[]): SlackTeam;
  /** Calls made (of one method), in order; `at` is when the peer answered (epoch ms, sub-millisecond). */
  calls(method?: string): SlackCall[];
  /** Waits until `count` calls of `method` (matching `where`) were made; returns them. */
  waitForCalls(method: string, count: number, where?: (call: SlackCall) => boolean, timeoutMs?: number): Promise<SlackCall[]>;
  /** The next call of `method` is answered 429 with this Retry-After (seconds). */
  rateLimitNext(method: string, retryAfterSeconds: number): void;
  /**
   * The next call of `method` is received and never answered, as when Slack's reply is lost (or
   * its caller dies waiting); resolves with its arguments once it arrived. It is not among calls().
   */
  holdNext(method: string): Promise<Record<string, unknown>>;
  /** A trigger id as Slack puts in an interaction (views.open accepts it once, within 3 s). */
  triggerId(): string;
  /** A problem the peer saw in a call that it answered with an error (a test asserts none where it expects none). */
  rejected: Array<{ method: string; error: string; detail: string[] }>;
  close(): Promise<void>;
}

type Json = Record<string, unknown>;

/** Slack's form of an error: ok false with its error code (and, for blocks, what was wrong). */
class SlackRefusal extends Error {
  constructor(
    readonly error: string,
    readonly detail: string[] = [],
  ) {
    super(error);
  }
}

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The Block Kit checker: collects every problem of a list of blocks (or a modal view). */
class BlockKit {
  readonly problems: string[] = [];

  private fail(path: string, problem: string): void {
    this.problems.push(`${path}: ${problem}`);
  }

  private keys(path: string, value: Json, required: string[], optional: string[]): void {
    for (const key of required) if (!(key in value)) this.fail(path, `missing ${key}`);
    for (const key of Object.keys(value)) if (!required.includes(key) && !optional.includes(key)) this.fail(path, `unknown field ${key}`);
  }

  private string(path: string, value: unknown, max: number, min = 1): void {
    if (typeof value !== 'string') return this.fail(path, 'must be a string');
    if (value.length < min || value.length > max) this.fail(path, `length ${value.length} outside ${min}..${max}`);
  }

  text(path: string, value: unknown, max: number, only?: 'plain_text'): void {
    if (!isObject(value)) return this.fail(path, 'must be a text object');
    if (value.type !== 'plain_text' && value.type !== 'mrkdwn') return this.fail(path, `text type ${String(value.type)}`);
    if (only && value.type !== only) this.fail(path, `must be ${only}`);
    this.keys(path, value, ['type', 'text'], value.type === 'plain_text' ? ['emoji'] : ['verbatim']);
    this.string(`${path}.text`, value.text, max);
  }

  private element(path: string, value: unknown, inInput: boolean): void {
    if (!isObject(value)) return this.fail(path, 'must be an object');
    if (value.type === 'button' && !inInput) {
      this.keys(path, value, ['type', 'text', 'action_id'], ['value', 'style', 'url', 'confirm', 'accessibility_label']);
      this.text(`${path}.text`, value.text, 75, 'plain_text');
      this.string(`${path}.action_id`, value.action_id, 255);
      if ('value' in value) this.string(`${path}.value`, value.value, 2_000);
      if ('style' in value && value.style !== 'primary' && value.style !== 'danger') this.fail(path, `style ${String(value.style)}`);
    } else if (value.type === 'static_select') {
      this.keys(path, value, ['type', 'action_id', 'options'], ['placeholder', 'initial_option', 'confirm', 'focus_on_load']);
      this.string(`${path}.action_id`, value.action_id, 255);
      if ('placeholder' in value) this.text(`${path}.placeholder`, value.placeholder, 150, 'plain_text');
      if (!Array.isArray(value.options) || value.options.length < 1 || value.options.length > 100) return this.fail(path, 'options must be 1..100');
      value.options.forEach((option: unknown, index) => {
        if (!isObject(option)) return this.fail(`${path}.options[${index}]`, 'must be an object');
        this.keys(`${path}.options[${index}]`, option, ['text', 'value'], ['description']);
        this.text(`${path}.options[${index}].text`, option.text, 75, 'plain_text');
        this.string(`${path}.options[${index}].value`, option.value, 150);
      });
    } else if (value.type === 'plain_text_input' && inInput) {
      this.keys(path, value, ['type', 'action_id'], ['placeholder', 'initial_value', 'multiline', 'min_length', 'max_length', 'focus_on_load']);
      this.string(`${path}.action_id`, value.action_id, 255);
      if ('placeholder' in value) this.text(`${path}.placeholder`, value.placeholder, 150, 'plain_text');
      if ('max_length' in value && (typeof value.max_length !== 'number' || value.max_length > 3_000)) this.fail(path, 'max_length must be <= 3000');
    } else {
      this.fail(path, `element type ${String(value.type)} not allowed here`);
    }
  }

  private block(path: string, value: unknown, surface: 'message' | 'modal'): void {
    if (!isObject(value)) return this.fail(path, 'must be an object');
    if ('block_id' in value) this.string(`${path}.block_id`, value.block_id, 255);
    switch (value.type) {
      case 'section':
        this.keys(path, value, ['type'], ['text', 'fields', 'block_id', 'accessory']);
        if (!('text' in value) && !('fields' in value)) this.fail(path, 'needs text or fields');
        if ('text' in value) this.text(`${path}.text`, value.text, 3_000);
        if ('fields' in value) {
          if (!Array.isArray(value.fields) || value.fields.length < 1 || value.fields.length > 10) this.fail(path, 'fields must be 1..10');
          else value.fields.forEach((field: unknown, index) => this.text(`${path}.fields[${index}]`, field, 2_000));
        }
        if ('accessory' in value) this.element(`${path}.accessory`, value.accessory, false);
        return;
      case 'context':
        this.keys(path, value, ['type', 'elements'], ['block_id']);
        if (!Array.isArray(value.elements) || value.elements.length < 1 || value.elements.length > 10) return this.fail(path, 'elements must be 1..10');
        value.elements.forEach((element: unknown, index) => this.text(`${path}.elements[${index}]`, element, 3_000));
        return;
      case 'actions':
        this.keys(path, value, ['type', 'elements'], ['block_id']);
        if (!Array.isArray(value.elements) || value.elements.length < 1 || value.elements.length > 25) return this.fail(path, 'elements must be 1..25');
        value.elements.forEach((element: unknown, index) => this.element(`${path}.elements[${index}]`, element, false));
        return;
      case 'divider':
        this.keys(path, value, ['type'], ['block_id']);
        return;
      case 'header':
        this.keys(path, value, ['type', 'text'], ['block_id']);
        this.text(`${path}.text`, value.text, 150, 'plain_text');
        return;
      case 'input':
        if (surface !== 'modal') return this.fail(path, 'input blocks are for modals');
        this.keys(path, value, ['type', 'label', 'element'], ['block_id', 'hint', 'optional', 'dispatch_action']);
        this.text(`${path}.label`, value.label, 2_000, 'plain_text');
        this.element(`${path}.element`, value.element, true);
        return;
      default:
        this.fail(path, `block type ${String(value.type)}`);
    }
  }

  blocks(value: unknown, surface: 'message' | 'modal'): void {
    const max = surface === 'modal' ? 100 : 50;
    if (!Array.isArray(value)) return this.fail('blocks', 'must be an array');
    if (value.length > max) this.fail('blocks', `more than ${max}`);
    value.forEach((block, index) => this.block(`blocks[${index}]`, block, surface));
  }

  view(value: unknown): void {
    if (!isObject(value)) return this.fail('view', 'must be an object');
    this.keys('view', value, ['type', 'title', 'blocks'], ['callback_id', 'private_metadata', 'submit', 'close', 'clear_on_close', 'notify_on_close', 'external_id']);
    if (value.type !== 'modal') this.fail('view.type', String(value.type));
    this.text('view.title', value.title, 24, 'plain_text');
    if ('submit' in value) this.text('view.submit', value.submit, 24, 'plain_text');
    if ('close' in value) this.text('view.close', value.close, 24, 'plain_text');
    if ('callback_id' in value) this.string('view.callback_id', value.callback_id, 255);
    if ('private_metadata' in value) this.string('view.private_metadata', value.private_metadata, 3_000, 0);
    this.blocks(value.blocks, 'modal');
  }
}

/** The arguments of a call in either encoding Slack accepts; form fields holding JSON (blocks, view) are parsed. */
function argumentsOf(request: IncomingMessage, body: string): { args: Json; token: string | undefined } {
  const type = (request.headers['content-type'] ?? '').split(';')[0]?.trim();
  const bearer = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1];
  if (type === 'application/json') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      throw new SlackRefusal('invalid_json');
    }
    if (!isObject(parsed)) throw new SlackRefusal('invalid_json');
    // JSON bodies carry the token only in the Authorization header.
    return { args: parsed, token: bearer };
  }
  if (type !== 'application/x-www-form-urlencoded') throw new SlackRefusal('invalid_form_data');
  const form = Object.fromEntries(new URLSearchParams(body));
  const args: Json = {};
  for (const [key, value] of Object.entries(form)) {
    if (key === 'token') continue;
    if (key === 'blocks' || key === 'view') {
      try {
        args[key] = JSON.parse(value);
      } catch {
        throw new SlackRefusal(key === 'blocks' ? 'invalid_blocks_format' : 'invalid_arguments');
      }
    } else {
      args[key] = value;
    }
  }
  return { args, token: bearer ?? form.token };
}

const present = (args: Json, name: string): string => {
  const value = args[name];
  if (typeof value !== 'string' || value === '') throw new SlackRefusal(name === 'channel' ? 'channel_not_found' : 'invalid_arguments', [`missing ${name}`]);
  return value;
};

export async function startSlackPeer(): Promise<SlackPeer> {
  const teams = new Map<string, SlackTeam & { channels: Set<string> }>();
  const byToken = new Map<string, string>();
  /** Posted messages per channel: their ts. */
  const messages = new Map<string, Set<string>>();
  const triggers = new Map<string, number>();
  const limited = new Map<string, number>();
  /** Methods whose next call is held unanswered: what to tell when it arrives. */
  const holding = new Map<string, (args: Json) => void>();
  const recorded: SlackCall[] = [];
  const rejected: SlackPeer['rejected'] = [];
  /** Checks of waitForCalls, run after each recorded call. */
  const waiters = new Set<() => void>();
  let sequence = 0;
  const nextTs = () => `${Math.floor(Date.now() / 1_000)}.${String((sequence += 1)).padStart(6, '0')}`;

  function messageContent(args: Json): void {
    if (args.text === undefined && args.blocks === undefined) throw new SlackRefusal('no_text');
    if (args.text !== undefined && (typeof args.text !== 'string' || args.text.length > 40_000)) throw new SlackRefusal('msg_too_long');
    if (args.blocks !== undefined) {
      const kit = new BlockKit();
      kit.blocks(args.blocks, 'message');
      if (kit.problems.length > 0) throw new SlackRefusal('invalid_blocks', kit.problems);
    }
  }

  function channelOf(team: SlackTeam & { channels: Set<string> }, args: Json): string {
    const channel = present(args, 'channel');
    if (!team.channels.has(channel)) throw new SlackRefusal('channel_not_found');
    return channel;
  }

  const methods: Record<string, (team: SlackTeam & { channels: Set<string> }, args: Json) => Json> = {
    'auth.test': (team) => ({ url: `https://${team.teamName.toLowerCase()}.slack.com/`, team: team.teamName, user: 'herald', team_id: team.teamId, user_id: team.botUserId, bot_id: `B${team.botUserId.slice(1)}` }),
    'conversations.open': (team, args) => {
      const users = present(args, 'users');
      if (!/^[UW][A-Z0-9]{2,30}$/.test(users)) throw new SlackRefusal('user_not_found');
      const channel = `D${users.slice(1)}`;
      team.channels.add(channel);
      return { channel: { id: channel } };
    },
    'chat.postMessage': (team, args) => {
      const channel = channelOf(team, args);
      messageContent(args);
      const ts = nextTs();
      messages.set(channel, (messages.get(channel) ?? new Set()).add(ts));
      return { channel, ts, message: { text: args.text, blocks: args.blocks, ts } };
    },
    'chat.update': (team, args) => {
      const channel = channelOf(team, args);
      const ts = present(args, 'ts');
      if (!messages.get(channel)?.has(ts)) throw new SlackRefusal('message_not_found');
      messageContent(args);
      return { channel, ts, text: args.text };
    },
    'chat.postEphemeral': (team, args) => {
      channelOf(team, args);
      present(args, 'user');
      messageContent(args);
      return { message_ts: nextTs() };
    },
    'views.open': (_team, args) => {
      const trigger = present(args, 'trigger_id');
      const issued = triggers.get(trigger);
      triggers.delete(trigger);
      if (issued === undefined || Date.now() - issued > 3_000) throw new SlackRefusal('expired_trigger_id');
      const kit = new BlockKit();
      kit.view(args.view);
      if (kit.problems.length > 0) throw new SlackRefusal('invalid_arguments', kit.problems);
      return { view: { id: `V${randomBytes(5).toString('hex').toUpperCase()}`, ...(args.view as Json) } };
    },
  };

  async function answer(request: IncomingMessage, body: string): Promise<{ status: number; headers?: Record<string, string>; json: Json }> {
    const match = /^\/api\/([a-zA-Z.]+)$/.exec(request.url ?? '');
    const method = match?.[1] ?? '';
    if (request.method !== 'POST') return { status: 405, json: { ok: false, error: 'method_not_allowed' } };
    const handler = methods[method];
    if (!handler) return { status: 404, json: { ok: false, error: 'unknown_method' } };
    const retryAfter = limited.get(method);
    if (retryAfter !== undefined) {
      limited.delete(method);
      return { status: 429, headers: { 'retry-after': String(retryAfter) }, json: { ok: false, error: 'ratelimited' } };
    }
    try {
      const { args, token } = argumentsOf(request, body);
      if (token === undefined) throw new SlackRefusal('not_authed');
      const teamId = byToken.get(token);
      const team = teamId === undefined ? undefined : teams.get(teamId);
      if (!team) throw new SlackRefusal('invalid_auth');
      const hold = holding.get(method);
      if (hold) {
        holding.delete(method);
        hold(args);
        return new Promise<never>(() => undefined);
      }
      const response = { ok: true, ...handler(team, args) };
      recorded.push({ method, teamId: team.teamId, args, response, at: performance.timeOrigin + performance.now() });
      for (const waiter of [...waiters]) waiter();
      return { status: 200, json: response };
    } catch (err) {
      if (!(err instanceof SlackRefusal)) throw err;
      rejected.push({ method, error: err.error, detail: err.detail });
      return { status: 200, json: { ok: false, error: err.error, ...(err.detail.length > 0 ? { response_metadata: { messages: err.detail } } : {}) } };
    }
  }

  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      answer(request, Buffer.concat(chunks).toString('utf8')).then(
        ({ status, headers, json }) => response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers }).end(JSON.stringify(json)),
        (err: unknown) => response.writeHead(500).end(String(err)),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    apiUrl: `http://127.0.0.1:${port}/api/`,
    rejected,
    addTeam(channels = []) {
      const id = randomBytes(4).toString('hex').toUpperCase();
      const team = {
        teamId: `T${id}`,
        teamName: `Team${id}`,
        botToken: `xoxb-${randomBytes(6).readUIntBE(0, 6)}-${randomBytes(12).toString('hex')}`,
        botUserId: `U${randomBytes(4).toString('hex').toUpperCase()}`,
        signingSecret: randomBytes(16).toString('hex'),
        channels: new Set(channels),
      };
      teams.set(team.teamId, team);
      byToken.set(team.botToken, team.teamId);
      const { channels: _channels, ...visible } = team;
      return visible;
    },
    calls: (method) => recorded.filter((call) => method === undefined || call.method === method),
    waitForCalls(method, count, where = () => true, timeoutMs = 10_000) {
      return new Promise<SlackCall[]>((resolve, reject) => {
        const found = () => recorded.filter((call) => call.method === method && where(call));
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`expected ${count} ${method} call(s), saw ${found().length}; rejected: ${JSON.stringify(rejected)}`));
        }, timeoutMs);
        function check(): void {
          const calls = found();
          if (calls.length < count) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(calls);
        }
        waiters.add(check);
        check();
      });
    },
    rateLimitNext(method, retryAfterSeconds) {
      limited.set(method, retryAfterSeconds);
    },
    holdNext(method) {
      return new Promise((resolve) => holding.set(method, resolve));
    },
    triggerId() {
      const id = `${Date.now()}.${randomBytes(6).readUIntBE(0, 6)}.${randomBytes(16).toString('hex')}`;
      triggers.set(id, Date.now());
      return id;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // A held call's connection would keep the server open.
        server.closeAllConnections();
      }),
  };
}

/** An interaction request as Slack sends it: the payload form-encoded, signed v0 with the app's signing secret at `timestamp` (seconds; now by default). */
export function slackInteractionRequest(signingSecret: string, payload: unknown, timestamp = Math.floor(Date.now() / 1_000)): { body: string; headers: Record<string, string> } {
  const body = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
  const signature = `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
  return { body, headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-slack-request-timestamp': String(timestamp), 'x-slack-signature': signature } };
}
