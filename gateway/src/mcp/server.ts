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
  /** Named in the OAuth protected resource metadata (RFC 9728). */
  authorizationServer: string;
  limiter: RateLimiter;
  /** Requests without a key (the handshake, the tool catalogue) are limited per client IP. */
  ipRateLimitPerMinute: number;
}

const INSTRUCTIONS =
  'Herald reaches a real person. send_notification tells them something; ask_user asks and waits for the answer ' +
  '(fail closed: only an explicit yes approves). A question not answered within the wait keeps its correlationId: ' +
  'continue with wait_for_answer, or withdraw it with cancel_question. With a dashboard key, create_campaign, send_campaign ' +
  "and get_campaign_stats run push campaigns to the site's subscribers. Tool calls need \"Authorization: Bearer <Herald API key>\".";

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
  ({ publicOrigin, apiPrefix, authorizationServer, limiter, ipRateLimitPerMinute }: McpOptions): FastifyPluginAsync =>
  async (app: FastifyInstance) => {
    const documentationBase = `${publicOrigin}/docs/errors`;
    const endpoint = `${publicOrigin}${MCP_PATH}`;
    const resourceMetadata = resourceMetadataUrl(publicOrigin);
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
      // Keyed calls count against their key's bucket (as REST); keyless ones against the caller's IP,
      // in a bucket of their own so discovery traffic never eats into the answer page's.
      if (request.headers.authorization === undefined) await enforceRateLimit(limiter, reply, `mcp-ip:${request.ip}`, ipRateLimitPerMinute);
      const body = request.body;
      if (callsTool(body) && request.headers.authorization === undefined) {
        const missing = new HeraldError('unauthorized', 'Calling a tool needs an API key: send "Authorization: Bearer pk_<id>.<secret>".', { title: 'Unauthorized' });
        return challenge(reply, errorBody(missing, documentationBase), false);
      }
      const exchange = new RestExchange(app, apiPrefix, request);
      const forwarded = webRequest(endpoint, request);
      exchanges.set(forwarded, exchange);
      const response = (await isLegacyRequest(forwarded, body)) ? await serveLegacy(forwarded, body, exchange) : await modern.fetch(forwarded, { parsedBody: body });
      const payload = Buffer.from(await response.arrayBuffer());
      for (const [name, value] of exchange.responseHeaders) void reply.header(name, value);
      if (exchange.rejected) return challenge(reply, exchange.rejected, true);
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
        authorizationServers: [authorizationServer],
      },
      tools: TOOLS.map(({ name, title, description, scope, inputSchema }) => ({ name, title, description, scope, inputSchema })),
    }));

    // RFC 9728: the resource is the whole origin, since one key works for REST and MCP alike.
    app.get('/.well-known/oauth-protected-resource', { config: { access: { public: true } } }, async () => ({
      resource: publicOrigin,
      authorization_servers: [authorizationServer],
      bearer_methods_supported: ['header'],
      scopes_supported: [...new Set(TOOLS.map((definition) => definition.scope))],
      resource_name: 'Herald',
    }));
  };
