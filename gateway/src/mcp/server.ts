import { errorBody, HeraldError } from '@herald/errors';
import {
  createMcpHandler,
  fromJsonSchema,
  isLegacyRequest,
  McpServer,
  SUPPORTED_PROTOCOL_VERSIONS,
  WebStandardStreamableHTTPServerTransport,
  type JsonSchemaValidator,
  type jsonSchemaValidator,
} from '@modelcontextprotocol/server';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';

import { enforceRateLimit, type RateLimiter } from '../rate-limit.js';
import { bearerChallenge, resourceMetadataUrl } from '../oauth/tokens.js';
import { OPENAPI_VERSION } from '../openapi.js';
import { isJsonObject, RestExchange, type Json } from './rest.js';
import { runTool, TOOLS } from './tools.js';

/**
 * MCP over Streamable HTTP at {origin}/api/mcp/mcp, stateless: every POST is served by a fresh
 * server instance and nothing is kept between requests (questions live in the decision service).
 * The 2026-07-28 revision is served by the SDK's createMcpHandler; 2025 revisions (initialize
 * handshake, no per-request envelope) by a per-request transport answering JSON, so a tool call's
 * HTTP answer can still become a 401 or carry the rate-limit headers after the tool ran.
 */

export const MCP_PATH = '/api/mcp/mcp';
const MODERN_PROTOCOL_VERSION = '2026-07-28';
const PROTOCOL_VERSIONS = [MODERN_PROTOCOL_VERSION, ...SUPPORTED_PROTOCOL_VERSIONS];

export interface McpOptions {
  publicOrigin: string;
  /** Where REST routes live, for the in-process calls. */
  apiPrefix: string;
  /** Named in the OAuth protected resource metadata (RFC 9728) when one is configured; empty: none. */
  authorizationServer: string;
  limiter: RateLimiter;
  /** Requests without a valid credential (the handshake, the tool catalogue) are limited per client IP, a batch by its messages. */
  ipRateLimitPerMinute: number;
  /** Browser origins allowed to call MCP besides the public origin; a request without Origin is not from a browser and is allowed. */
  allowedOrigins: readonly string[];
  /** The largest response body (a batch's answers together); larger is a 400. */
  responseLimitBytes: number;
}

const INSTRUCTIONS =
  'Herald reaches a real person. send_notification tells them something; ask_user asks and waits for the answer ' +
  '(fail closed: only an explicit yes approves). A question not answered within the wait keeps its correlationId: ' +
  'continue with wait_for_answer, or withdraw it with cancel_question. With a dashboard key, create_campaign, send_campaign ' +
  "and get_campaign_stats run push campaigns to the site's subscribers, and create_flow and list_flow_runs automate sends triggered by " +
  'subscriptions and engagement. Tool calls need "Authorization: Bearer <Herald API key>".';

// The SDK would refuse bad arguments with its own message; each tool validates them itself so the
// error carries REST's code and fields.
const unchecked: jsonSchemaValidator = {
  getValidator<T>(): JsonSchemaValidator<T> {
    return (input) => ({ valid: true, data: input as T, errorMessage: undefined });
  },
};

function heraldServer(rest: RestExchange, documentationBase: string): McpServer {
  const server = new McpServer({ name: 'herald', title: 'Herald', version: OPENAPI_VERSION }, { instructions: INSTRUCTIONS });
  for (const definition of TOOLS) {
    server.registerTool(
      definition.name,
      {
        title: definition.title,
        description: definition.description,
        inputSchema: fromJsonSchema(definition.inputSchema, unchecked),
        annotations: definition.annotations,
      },
      (args: unknown) => runTool(definition, args, rest, documentationBase),
    );
  }
  return server;
}

/** How many JSON-RPC messages a body holds (a 2025-03-26 batch holds several). */
const messageCount = (body: unknown): number => (Array.isArray(body) ? Math.max(1, body.length) : 1);

/** Whether a JSON-RPC message (or a 2025-03-26 batch) calls a tool. */
function callsTool(body: unknown): boolean {
  if (Array.isArray(body)) return body.some(callsTool);
  return isJsonObject(body) && body.method === 'tools/call';
}

/** What the SDK reads from the HTTP request (the MCP headers, content negotiation). */
function webRequest(url: string, request: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (typeof value === 'string' && (name.startsWith('mcp-') || name === 'accept' || name === 'content-type' || name === 'authorization')) headers.set(name, value);
  }
  return new Request(url, { method: 'POST', headers, body: JSON.stringify(request.body) });
}

export const mcpRoutes =
  ({ publicOrigin, apiPrefix, authorizationServer, limiter, ipRateLimitPerMinute, allowedOrigins, responseLimitBytes }: McpOptions): FastifyPluginAsync =>
  async (app: FastifyInstance) => {
    const documentationBase = `${publicOrigin}/docs/errors`;
    const endpoint = `${publicOrigin}${MCP_PATH}`;
    const resourceMetadata = resourceMetadataUrl(publicOrigin);
    const origins = new Set([new URL(publicOrigin).origin, ...allowedOrigins]);
    const authorizationServers = authorizationServer ? [authorizationServer] : [];
    const exchanges = new WeakMap<Request, RestExchange>();
    const exchangeOf = (request: Request | undefined): RestExchange => {
      const exchange = request && exchanges.get(request);
      if (!exchange) throw new Error('MCP request without its REST exchange');
      return exchange;
    };
    const modern = createMcpHandler(({ requestInfo }) => heraldServer(exchangeOf(requestInfo), documentationBase), {
      legacy: 'reject',
      onerror: (err) => app.log.debug({ err }, 'MCP request refused'),
    });
    app.addHook('onClose', async () => modern.close());

    async function serveLegacy(request: Request, body: unknown, exchange: RestExchange): Promise<Response> {
      const server = heraldServer(exchange, documentationBase);
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await server.connect(transport);
      try {
        return await transport.handleRequest(request, { parsedBody: body });
      } finally {
        await server.close();
      }
    }

    /** 401 with the challenge MCP clients follow to the protected resource metadata. */
    function challenge(reply: FastifyReply, body: Json, invalidToken: boolean): FastifyReply {
      return reply.code(401).header('www-authenticate', bearerChallenge(resourceMetadata, invalidToken ? 'invalid_token' : undefined)).type('application/json').send(body);
    }

    app.post(MCP_PATH, { config: { access: { public: true } } }, async (request, reply) => {
      // Streamable HTTP servers must check Origin (DNS rebinding): a browser page of another origin
      // is refused; a request without Origin does not come from a browser.
      const origin = request.headers.origin;
      if (origin !== undefined && !origins.has(origin)) {
        throw new HeraldError('forbidden', `Origin ${origin.slice(0, 200)} may not call MCP.`, {
          title: 'Origin not allowed',
          hint: 'Call MCP from a server, or add the origin to MCP_ALLOWED_ORIGINS.',
        });
      }
      // Tool calls of a valid credential count against its key's bucket (as REST). Everything else,
      // an invalid credential's included, counts against the caller's IP before any work, a batch
      // by its messages, in a bucket of its own so discovery traffic never eats into the answer page's.
      const body = request.body;
      const caller = await app.verifyCredential?.(request, reply);
      const keyed = caller !== undefined && !(caller instanceof HeraldError);
      if (!keyed) await enforceRateLimit(limiter, reply, `mcp-ip:${request.ip}`, ipRateLimitPerMinute, messageCount(body));
      if (callsTool(body) && !keyed) {
        const refusal = caller ?? new HeraldError('unauthorized', 'Calling a tool needs an API key: send "Authorization: Bearer pk_<id>.<secret>".', { title: 'Unauthorized' });
        return challenge(reply, errorBody(refusal, documentationBase), caller !== undefined);
      }
      const exchange = new RestExchange(app, apiPrefix, request);
      const forwarded = webRequest(endpoint, request);
      exchanges.set(forwarded, exchange);
      const response = (await isLegacyRequest(forwarded, body)) ? await serveLegacy(forwarded, body, exchange) : await modern.fetch(forwarded, { parsedBody: body });
      const payload = Buffer.from(await response.arrayBuffer());
      for (const [name, value] of exchange.responseHeaders) void reply.header(name, value);
      if (exchange.rejected) return challenge(reply, exchange.rejected, true);
      if (payload.length > responseLimitBytes) {
        throw new HeraldError('invalid_request', `The response would be larger than ${responseLimitBytes} bytes; send fewer messages per batch.`, { title: 'Response too large' });
      }
      response.headers.forEach((value, name) => {
        if (name !== 'content-length') void reply.header(name, value);
      });
      return reply.code(response.status).send(payload);
    });

    // The manifest: what an agent or a directory needs to connect, without a round trip.
    app.get('/.well-known/mcp', { config: { access: { public: true } } }, async () => ({
      name: 'herald',
      title: 'Herald',
      version: OPENAPI_VERSION,
      description: 'Reach a real person from an agent: push notifications, and questions that wait for a human answer (fail closed).',
      endpoint,
      transport: { type: 'streamable-http', protocolVersions: PROTOCOL_VERSIONS, sessions: false },
      authentication: {
        type: 'bearer',
        header: 'Authorization',
        format: 'Bearer pk_<id>.<secret>',
        requiredFor: ['tools/call'],
        protectedResourceMetadata: resourceMetadata,
        authorizationServers,
      },
      tools: TOOLS.map(({ name, title, description, scope, inputSchema }) => ({ name, title, description, scope, inputSchema })),
    }));

    // RFC 9728: the resource is the whole origin, since one key works for REST and MCP alike.
    app.get('/.well-known/oauth-protected-resource', { config: { access: { public: true } } }, async () => ({
      resource: publicOrigin,
      // Only a configured server: naming one whose metadata does not exist sends clients to a 404.
      ...(authorizationServers.length > 0 && { authorization_servers: authorizationServers }),
      bearer_methods_supported: ['header'],
      scopes_supported: [...new Set(TOOLS.map((definition) => definition.scope))],
      resource_name: 'Herald',
    }));
  };
