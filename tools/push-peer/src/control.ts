// The control API under /__peer/ (README.md lists it): what a test or a benchmark in another
// process asks of the peer over HTTP, answered from the same methods an in-process caller uses.
import type { Exchange } from './exchange.js';
import type { FaultRule, PushPeer } from './types.js';

/** What the control API needs beyond the public interface. */
export interface ControlledPeer extends PushPeer {
  poolPublicKeys(): { p256dh: string; auth: string }[];
  acceptedPerEndpoint(): Record<string, number>;
  /** The pre-existing pool endpoints (`/__peer/key-pool` reports them). */
  readonly poolEndpoints: number | undefined;
}

const JSON_HEADERS = { 'content-type': 'application/json' } as const;

export async function serveControl(peer: ControlledPeer, ex: Exchange): Promise<void> {
  const url = new URL(ex.path, 'http://peer');
  const route = `${ex.method} ${url.pathname}`;
  const send = (status: number, value: unknown) => ex.respond(status, JSON_HEADERS, JSON.stringify(value));
  const readJson = async (): Promise<Record<string, unknown>> => {
    const body = await ex.readBody(1 << 20);
    if (body.kind !== 'complete') throw new TypeError('control request body missing or larger than 1 MiB');
    if (body.bytes.length === 0) return {};
    const value = JSON.parse(body.bytes.toString('utf8')) as unknown;
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TypeError('control request body must be a JSON object');
    return value as Record<string, unknown>;
  };
  const endpointParam = url.searchParams.get('endpoint') ?? undefined;
  try {
    switch (route) {
      case 'GET /__peer/health':
        return send(200, { ok: true, origin: peer.origin, mode: peer.mode });
      case 'GET /__peer/stats': {
        const stats = peer.stats();
        return send(200, url.searchParams.get('perEndpoint') === '1' ? { ...stats, perEndpoint: peer.acceptedPerEndpoint() } : stats);
      }
      case 'POST /__peer/reset':
        peer.reset();
        return send(200, { ok: true });
      case 'GET /__peer/received':
        return send(200, {
          messages: peer.received(endpointParam, { includeReplaced: url.searchParams.get('includeReplaced') === '1' }).map((m) => ({
            ...m,
            plaintext: m.plaintext.toString('base64url'),
            text: m.plaintext.toString('utf8'),
          })),
        });
      case 'GET /__peer/attempts':
        return send(200, { attempts: peer.attempts(endpointParam), count: endpointParam === undefined ? peer.stats().requests : peer.attemptCount(endpointParam) });
      case 'GET /__peer/key-pool':
        return send(200, { keys: peer.poolPublicKeys(), poolEndpoints: peer.poolEndpoints === Infinity ? 'unbounded' : (peer.poolEndpoints ?? 0) });
      case 'POST /__peer/subscriptions': {
        const body = await readJson();
        const count = body['count'] ?? 1;
        const applicationServerKey = body['applicationServerKey'];
        if (typeof count !== 'number' || !Number.isInteger(count) || count < 0 || count > 100_000) throw new TypeError('count must be an integer 0-100000');
        if (applicationServerKey !== undefined && typeof applicationServerKey !== 'string') throw new TypeError('applicationServerKey must be a base64url string');
        return send(200, { subscriptions: peer.createSubscriptions(count, applicationServerKey !== undefined ? { applicationServerKey } : {}) });
      }
      case 'POST /__peer/respond-with': {
        const body = await readJson();
        const endpoint = body['endpoint'];
        const rule = (body['rule'] ?? null) as FaultRule | FaultRule[] | null;
        if (typeof endpoint === 'string') peer.respondWith(endpoint, rule);
        else if (endpoint === undefined || endpoint === null) peer.respondWith(rule);
        else throw new TypeError('endpoint must be a string or absent');
        return send(200, { ok: true });
      }
      case 'POST /__peer/expire': {
        const body = await readJson();
        const endpoint = body['endpoint'];
        const status = body['status'] ?? 410;
        if (typeof endpoint !== 'string') throw new TypeError('endpoint must be a string');
        if (status !== 404 && status !== 410) throw new TypeError('status must be 404 or 410');
        peer.expireSubscription(endpoint, status);
        return send(200, { ok: true });
      }
      default:
        return send(404, { error: 'not_found', message: `no control route ${route}` });
    }
  } catch (err) {
    if (err instanceof TypeError || err instanceof RangeError || err instanceof SyntaxError) return send(400, { error: 'bad_control_request', message: err.message });
    throw err;
  }
}
