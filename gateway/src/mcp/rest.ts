import type { FastifyInstance, FastifyRequest } from 'fastify';

/**
 * An MCP tool calls the gateway's own REST route in-process (`app.inject`) with the caller's
 * headers, so authentication, scopes, plans, rate limits, validation and errors are exactly
 * REST's. One exchange serves one MCP HTTP request and remembers what its HTTP answer must carry.
 */

export type Json = Record<string, unknown>;

export const isJsonObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

export interface RestAnswer {
  status: number;
  body: Json;
}

/** Passed on to REST: the key and the passive machine report. */
const FORWARDED_REQUEST_HEADERS = ['authorization', 'x-herald-machine-id', 'x-herald-machine-name', 'x-herald-machine-platform'];
/** Passed back from REST onto the MCP response, as a REST caller would see them. */
const FORWARDED_RESPONSE_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'retry-after'];

export class RestExchange {
  /** The body of a 401 a REST call answered: the MCP response becomes that 401. */
  rejected: Json | undefined;
  readonly responseHeaders = new Map<string, string>();
  private readonly headers: Record<string, string> = {};

  constructor(
    private readonly app: FastifyInstance,
    private readonly prefix: string,
    request: FastifyRequest,
  ) {
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const value = request.headers[name];
      if (typeof value === 'string') this.headers[name] = value;
    }
    // The REST call's log lines name the MCP request they serve (as their clientRequestId).
    this.headers['x-request-id'] = request.id;
  }

  async call(method: 'GET' | 'POST' | 'DELETE', path: string, body?: Json): Promise<RestAnswer> {
    const response = await this.app.inject({
      method,
      url: `${this.prefix}${path}`,
      headers: body === undefined ? this.headers : { ...this.headers, 'content-type': 'application/json' },
      ...(body !== undefined && { payload: JSON.stringify(body) }),
    });
    for (const name of FORWARDED_RESPONSE_HEADERS) {
      const value = response.headers[name];
      if (value !== undefined) this.responseHeaders.set(name, String(value));
    }
    const parsed: unknown = response.body === '' ? {} : JSON.parse(response.body);
    const answer = { status: response.statusCode, body: isJsonObject(parsed) ? parsed : { value: parsed } };
    if (answer.status === 401) this.rejected = answer.body;
    return answer;
  }
}
