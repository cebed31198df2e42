import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { HeraldError } from '@herald/errors';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';

/**
 * The Herald Console (@herald/console's build, dist/app) under /console: index.html for every
 * console path (the app routes in the browser), never cached without asking; its content-hashed
 * assets under /console/assets/, cached for a year as immutable. A strict policy: the page runs
 * its own script and style sheet only, calls this origin only, and no site may frame it.
 */

export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  // https: images: the campaign composer previews the notification's icon and image from the site.
  "img-src 'self' data: https:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

export interface ConsoleBuild {
  index: Buffer;
  assets: Map<string, Asset>;
}

/** Reads the built console once; undefined when it was not built (npm run build does it). */
export function loadConsoleBuild(): ConsoleBuild | undefined {
  const root = join(dirname(fileURLToPath(import.meta.resolve('@herald/console/package.json'))), 'dist', 'app');
  if (!existsSync(join(root, 'index.html'))) return undefined;
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(join(root, 'assets'))) {
    const type = TYPES[extname(name)];
    if (!type) continue;
    const body = readFileSync(join(root, 'assets', name));
    assets.set(name, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` });
  }
  return { index: readFileSync(join(root, 'index.html')), assets };
}

function notBuilt(): HeraldError {
  return new HeraldError('unavailable', 'The console is not built on this server.', { title: 'Unavailable', hint: 'Run npm run build (it bundles console/).' });
}

function securityHeaders(reply: FastifyReply): FastifyReply {
  return reply.header('x-content-type-options', 'nosniff').header('referrer-policy', 'same-origin');
}

/** `build`: loadConsoleBuild()'s, read once at startup (undefined: not built, every path answers 503). */
export const consoleRoutes =
  (build: ConsoleBuild | undefined): FastifyPluginAsyncTypebox =>
  async (app) => {
    const publicAccess = { access: { public: true } } as const;
    if (!build) app.log.warn('the console is not built (npm run build): /console answers 503');

    const sendIndex = (reply: FastifyReply) => {
      if (!build) throw notBuilt();
      return securityHeaders(reply)
        .header('cache-control', 'no-cache')
        .header('content-security-policy', CONSOLE_CSP)
        .type('text/html; charset=utf-8')
        .send(build.index);
    };

    app.get('/console/assets/:name', { config: publicAccess, schema: { params: Type.Object({ name: Type.String({ maxLength: 100 }) }), hide: true } }, async (request, reply) => {
      if (!build) throw notBuilt();
      const asset = build.assets.get(request.params.name);
      if (!asset) throw new HeraldError('not_found', `No console asset ${request.params.name}.`);
      securityHeaders(reply).header('cache-control', 'public, max-age=31536000, immutable').header('etag', asset.etag).type(asset.type);
      if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
      return reply.send(asset.body);
    });
    app.get('/console', { config: publicAccess, schema: { hide: true } }, async (_request, reply) => sendIndex(reply));
    // Every other console path is a page of the app: the same index.html.
    app.get('/console/*', { config: publicAccess, schema: { hide: true } }, async (_request, reply) => sendIndex(reply));
  };
