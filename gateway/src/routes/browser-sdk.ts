import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { HeraldError } from '@herald/errors';
import type { PublicSite } from '@herald/proto/herald/account/v1/account';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';

import type { ServiceClients } from '../clients.js';
import type { GatewayConfig } from '../config.js';
import { accentColor, escapeHtml, PAGE_HEAD, sendTokenPage } from '../html.js';
import { perClientLimit, type RateLimiter } from '../rate-limit.js';

/**
 * The browser SDK as files ({origin}/sdk/...) and the hosted subscribe page of each site
 * ({origin}/s/<slug>) with its service worker (/s/<slug>/sw.js).
 *
 * The files come from @herald/browser-sdk's build (dist/bundle). Under the exact version
 * (/sdk/v0.1.0/herald.js) they never change: cached for a year as immutable, with the SRI hashes
 * of /sdk/v<version>/manifest.json. Under the major version (/sdk/v1/herald.js) they follow the
 * newest release: cached for an hour, so pin the exact version when using `integrity`.
 */

export const SDK_FILES = ['herald.js', 'herald.mjs', 'herald-sw.js', 'herald-page.js'] as const;
type SdkFileName = (typeof SDK_FILES)[number];

interface SdkFile {
  body: Buffer;
  integrity: string;
  etag: string;
  bytes: number;
}

export interface SdkBundle {
  /** The package version, e.g. 0.1.0. */
  version: string;
  major: string;
  files: Map<SdkFileName, SdkFile>;
}

/** Reads the built files once; undefined when @herald/browser-sdk was not bundled (npm run build does it). */
export function loadSdkBundle(): SdkBundle | undefined {
  const path = (file: string) => fileURLToPath(import.meta.resolve(`@herald/browser-sdk/${file}`));
  const { version } = JSON.parse(readFileSync(path('package.json'), 'utf8')) as { version: string };
  const files = new Map<SdkFileName, SdkFile>();
  for (const name of SDK_FILES) {
    const file = path(`bundle/${name}`);
    if (!existsSync(file)) return undefined;
    const body = readFileSync(file);
    const digest = createHash('sha384').update(body).digest('base64');
    files.set(name, { body, integrity: `sha384-${digest}`, etag: `"${digest.slice(0, 27)}"`, bytes: body.length });
  }
  return { version, major: `v${version.split('.')[0] ?? '0'}`, files };
}

const YEAR_IMMUTABLE = 'public, max-age=31536000, immutable';
const HOUR = 'public, max-age=3600';

function notBuilt(): HeraldError {
  return new HeraldError('unavailable', 'The browser SDK is not built on this server.', {
    title: 'Unavailable',
    hint: 'Run npm run build (it bundles sdks/browser-sdk).',
  });
}

function sendScript(request: FastifyRequest, reply: FastifyReply, file: SdkFile, cacheControl: string): FastifyReply {
  reply
    .header('cache-control', cacheControl)
    .header('etag', file.etag)
    // Loadable with crossorigin="anonymous" (needed for integrity) from any site's pages.
    .header('access-control-allow-origin', '*')
    .header('cross-origin-resource-policy', 'cross-origin')
    .header('x-content-type-options', 'nosniff')
    .type('text/javascript; charset=utf-8');
  if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
  return reply.send(file.body);
}

const SlugParams = Type.Object({ slug: Type.String({ maxLength: 200 }) });
const slugPattern = /^[a-z0-9-]{1,100}$/;

/** The site behind a slug; undefined when there is none (or the slug cannot be one). */
async function siteOfSlug(clients: ServiceClients, slug: string): Promise<PublicSite | undefined> {
  if (!slugPattern.test(slug)) return undefined;
  try {
    return (await clients.account.getPublicSite({ slug })).site;
  } catch (err) {
    if (err instanceof HeraldError && err.code === 'not_found') return undefined;
    throw err;
  }
}

const pageStyle = (accent: string) => `
body{font-family:system-ui,sans-serif;margin:0;padding:1rem;line-height:1.5;color:#1a1a1a;background:#f6f6f6}
main{max-width:30rem;margin:2rem auto;background:#fff;padding:1.5rem;border-radius:.75rem;border-top:.375rem solid ${accent};text-align:center}
.logo{max-width:6rem;max-height:6rem}
h1{font-size:1.4rem;margin:.5rem 0}
.domain{color:#555;margin:0 0 1rem}
button{font:inherit;font-weight:600;min-height:2.75rem;padding:.5rem 1.5rem;border:0;border-radius:.375rem;background:${accent};color:#fff;cursor:pointer}
button:focus-visible{outline:3px solid #1a1a1a;outline-offset:2px}
button:disabled{opacity:.6;cursor:progress}
[data-state=subscribed] #status{color:#0a6b2c;font-weight:600}
[data-state=blocked] #status,[data-state=unsupported] #status,[data-state=failed] #status{color:#a00000;font-weight:600}
`;

/** An https logo, or none: the page loads nothing else from elsewhere. */
function logoOf(site: PublicSite): URL | undefined {
  try {
    const url = new URL(site.logoUrl);
    return url.protocol === 'https:' ? url : undefined;
  } catch {
    return undefined;
  }
}

function subscribePage(site: PublicSite, bundle: SdkBundle, nonce: string, logo: URL | undefined): string {
  const base = `/s/${site.slug}`;
  const script = bundle.files.get('herald-page.js');
  return `${PAGE_HEAD}<title>Notifications from ${escapeHtml(site.name)}</title>
<style nonce="${nonce}">${pageStyle(accentColor(site.primaryColor))}</style>
</head>
<body>
<main data-state="loading" data-site-key="${escapeHtml(site.siteKey)}" data-service-worker="${escapeHtml(`${base}/sw.js`)}" data-scope="${escapeHtml(base)}">
${logo ? `<img class="logo" src="${escapeHtml(logo.href)}" alt="">` : ''}
<h1>Get notifications from ${escapeHtml(site.name)}</h1>
<p class="domain">${escapeHtml(site.domain)}</p>
<button id="subscribe" type="button" hidden>${escapeHtml(site.buttonText || 'Subscribe')}</button>
<p id="status" role="status" aria-live="polite">Loading…</p>
<noscript><p>Turning on notifications needs JavaScript.</p></noscript>
</main>
<script src="/sdk/v${escapeHtml(bundle.version)}/herald-page.js" integrity="${script?.integrity ?? ''}"></script>
</body>
</html>
`;
}

function notFoundPage(): string {
  return `${PAGE_HEAD}<title>No such site</title>
</head>
<body>
<main>
<h1>No such site</h1>
<p>There is no subscribe page at this address. Check the link, or ask the site for a new one.</p>
</main>
</body>
</html>
`;
}

export interface BrowserSdkRouteOptions {
  clients: ServiceClients;
  config: Pick<GatewayConfig, 'ipRateLimitPerMinute'>;
  limiter: RateLimiter;
  /** Loaded at startup; tests may hand in their own. */
  bundle?: SdkBundle;
}

export const browserSdkRoutes =
  ({ clients, config, limiter, bundle = loadSdkBundle() }: BrowserSdkRouteOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    const publicAccess = { access: { public: true } } as const;
    const limitPerIp = perClientLimit(limiter, config.ipRateLimitPerMinute, (params) => `site:${(params.slug ?? '').toLowerCase()}`);
    if (!bundle) app.log.warn('the browser SDK is not built (npm run build): /sdk and /s/<slug> answer 503');

    const FileParams = Type.Object({ version: Type.String({ maxLength: 40 }), file: Type.String({ maxLength: 40 }) });
    app.get('/sdk/:version/:file', { config: publicAccess, schema: { params: FileParams, hide: true } }, async (request, reply) => {
      if (!bundle) throw notBuilt();
      const { version, file } = request.params;
      const exact = version === `v${bundle.version}`;
      if (!exact && version !== bundle.major) throw new HeraldError('not_found', `No browser SDK ${version}; this server has v${bundle.version} (also as ${bundle.major}).`);
      if (file === 'manifest.json') {
        const files = Object.fromEntries(
          [...bundle.files].map(([name, entry]) => [name, { url: `/sdk/v${bundle.version}/${name}`, integrity: entry.integrity, bytes: entry.bytes }]),
        );
        return reply.header('cache-control', exact ? YEAR_IMMUTABLE : HOUR).header('access-control-allow-origin', '*').send({ version: bundle.version, files });
      }
      const entry = bundle.files.get(file as SdkFileName);
      if (!entry) throw new HeraldError('not_found', `No file ${file} in the browser SDK; it has ${SDK_FILES.join(', ')} and manifest.json.`);
      return sendScript(request, reply, entry, exact ? YEAR_IMMUTABLE : HOUR);
    });

    app.get('/s/:slug', { config: publicAccess, onRequest: limitPerIp, schema: { params: SlugParams, hide: true } }, async (request, reply) => {
      const site = await siteOfSlug(clients, request.params.slug);
      const strict = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
      if (!site) return sendTokenPage(reply, 404, notFoundPage(), strict);
      if (!bundle) throw notBuilt();
      const nonce = randomBytes(16).toString('base64');
      const logo = logoOf(site);
      // Herald's own script and worker, the page's own style, the site's logo: nothing else loads.
      const policy = `${strict}; script-src 'self'; style-src 'nonce-${nonce}'; img-src ${logo ? logo.origin : "'none'"}; connect-src 'self'; worker-src 'self'; manifest-src 'none'`;
      return sendTokenPage(reply, 200, subscribePage(site, bundle, nonce, logo), policy);
    });

    app.get('/s/:slug/sw.js', { config: publicAccess, onRequest: limitPerIp, schema: { params: SlugParams, hide: true } }, async (request, reply) => {
      const site = await siteOfSlug(clients, request.params.slug);
      if (!site) throw new HeraldError('not_found', `No site ${request.params.slug}.`);
      if (!bundle) throw notBuilt();
      const worker = bundle.files.get('herald-sw.js');
      if (!worker) throw notBuilt();
      // The page is /s/<slug> itself, above the worker's folder: the scope must be allowed.
      reply.header('service-worker-allowed', `/s/${site.slug}`);
      // Browsers check a worker for updates at most daily whatever it says; no-cache makes each check real.
      return sendScript(request, reply, worker, 'no-cache');
    });
  };
