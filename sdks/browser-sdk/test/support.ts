import { mkdir } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { fileURLToPath } from 'node:url';

import { call, createWorkspace, eventually, freePort, SERVER_API, type TestWorkspace } from '@herald/testkit';

export { browserPath } from '@herald/testkit';

/**
 * What the real-browser tests share: a site of their own (a page using the SDK from Herald's
 * origin, with the site's copy of the service worker), the browsers' paths, the artifacts folder.
 */

/** Screenshots the tests take (git-ignored). */
export const artifactsDir = fileURLToPath(new URL('../../artifacts/', import.meta.url));

export async function artifactPath(name: string): Promise<string> {
  await mkdir(artifactsDir, { recursive: true });
  return `${artifactsDir}${name}`;
}


export interface TestSite {
  /**
   * The site's home page at a non-loopback address of this machine, over http: not a secure
   * context, so browsers give it no service workers (the SDK comes from the site's own copy).
   */
  insecureUrl(): string;
  /** http://localhost:<port>: a secure context, as a site's registered domain (localhost:<port>). */
  origin: string;
  port: number;
  /** What POST /answer received (the question buttons' answer URL points here). */
  answers: string[];
  close(): Promise<void>;
}

export interface SiteOptions {
  /** Chosen first (testkit's freePort), since the site's domain is registered with it. */
  port: number;
  gatewayUrl: string;
  siteKey: string;
  /** The SDK as the page loads it, with its SRI hash. */
  sdkUrl: string;
  sdkIntegrity: string;
  /** The service worker's source (the site serves a copy of herald-sw.js). */
  serviceWorker: Buffer;
  /** The SDK's source, for pages that load it from the site itself (`?local-sdk`). */
  sdk: Buffer;
}

/**
 * The test site: `/` and any other path is a page that loads the SDK from Herald and records
 * what its callbacks get in `window.heraldEvents`; `?navigate=no` makes onNotificationClick
 * return false; `?autoPrompt&promptDelay=<ms>` sets those options; `?local-sdk` loads the SDK
 * from the site's own copy. It listens on every interface, so it can also be opened from a non-local
 * address (not a secure context: no service workers there).
 */
export async function startSite(options: SiteOptions): Promise<TestSite> {
  const answers: string[] = [];
  const app = `window.heraldEvents = [];
var params = new URLSearchParams(location.search);
window.herald = Herald.createHerald({
  siteKey: ${JSON.stringify(options.siteKey)},
  apiUrl: ${JSON.stringify(options.gatewayUrl)},
  autoPrompt: params.has('autoPrompt'),
  promptDelay: Number(params.get('promptDelay') || 0),
  onSubscribe: function (s) { heraldEvents.push(['subscribe', s.subscriberId, s.endpoint]); },
  onPermissionDenied: function () { heraldEvents.push(['permissionDenied']); },
  onNotSupported: function () { heraldEvents.push(['notSupported']); },
  onNotificationClick: function (url, data) {
    heraldEvents.push(['click', url, data]);
    return params.get('navigate') !== 'no';
  }
});
`;
  const page = (title: string, local: boolean) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title}</title></head>
<body><h1>${title}</h1>
<script src="${local ? '/herald.js' : options.sdkUrl}" integrity="${options.sdkIntegrity}" crossorigin="anonymous"></script>
<script src="/app.js"></script>
</body></html>`;
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://site');
    const path = url.pathname;
    if (path === '/herald-sw.js') {
      response.writeHead(200, { 'content-type': 'text/javascript' }).end(options.serviceWorker);
    } else if (path === '/herald.js') {
      response.writeHead(200, { 'content-type': 'text/javascript' }).end(options.sdk);
    } else if (path === '/app.js') {
      response.writeHead(200, { 'content-type': 'text/javascript' }).end(app);
    } else if (path === '/answer' && request.method === 'POST') {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      request.on('end', () => {
        answers.push(body);
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
    } else if (path === '/favicon.ico') {
      response.writeHead(404).end();
    } else {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page(path === '/' ? 'Site home' : `Site page ${path}`, url.searchParams.has('local-sdk')));
    }
  });
  await new Promise<void>((resolve) => server.listen(options.port, '0.0.0.0', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    insecureUrl() {
      const external = Object.values(networkInterfaces())
        .flat()
        .find((entry) => entry && entry.family === 'IPv4' && !entry.internal);
      if (!external) throw new Error('the machine has no non-loopback IPv4 address to open an insecure page from');
      return `http://${external.address}:${port}/?local-sdk`;
    },
    origin: `http://localhost:${port}`,
    port,
    answers,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A workspace whose site is the test site (domain localhost:<a free port>), the site started with
 * Herald's SDK (SRI from the manifest) and its own copy of the worker.
 */
export async function startSiteWorkspace(gatewayUrl: string): Promise<{ workspace: TestWorkspace; site: TestSite }> {
  const port = await freePort();
  const workspace = await createWorkspace('growth', `localhost:${port}`);
  const manifest = await call<{ files: Record<string, { integrity: string }> }>(gatewayUrl, '/sdk/v1/manifest.json');
  const download = async (file: string) => Buffer.from(await (await fetch(`${gatewayUrl}/sdk/v1/${file}`)).arrayBuffer());
  const site = await startSite({
    port,
    gatewayUrl,
    siteKey: workspace.siteKey,
    sdkUrl: `${gatewayUrl}/sdk/v1/herald.js`,
    sdkIntegrity: manifest.body.files['herald.js']?.integrity ?? '',
    serviceWorker: await download('herald-sw.js'),
    sdk: await download('herald.js'),
  });
  return { workspace, site };
}

/** A campaign's counters: pushes the push service accepted, impressions and clicks the worker reported. */
export type CampaignCounts = { totalSent: number; totalDelivered: number; totalClicked: number };

/** Waits until the campaign's stats show exactly `expected` (a report counted twice never matches). */
export async function campaignCounted(gatewayUrl: string, workspace: TestWorkspace, campaignId: string, expected: CampaignCounts): Promise<void> {
  const read = async () => {
    const { body } = await call<CampaignCounts>(gatewayUrl, `${SERVER_API}/campaigns/${campaignId}/stats`, { key: workspace.apiKey });
    return { totalSent: body.totalSent, totalDelivered: body.totalDelivered, totalClicked: body.totalClicked };
  };
  await eventually('the campaign counted the reports', read, (stats) => JSON.stringify(stats) === JSON.stringify(expected));
}
