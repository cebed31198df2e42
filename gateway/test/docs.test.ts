import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { HeraldError, type ErrorCode } from '@herald/errors';
import { repoRoot, startStack, type Stack } from '@herald/testkit';

// The documentation pages and /llms.txt: every page listed, every link resolving, Markdown by
// `.md` or `Accept: text/markdown`, HTML by default, an unknown page the standard 404.

const ORIGIN = 'https://herald.test';
const MARKDOWN = 'text/markdown; charset=utf-8';
const HTML = 'text/html; charset=utf-8';

let stack: Stack;
let pages: string[];
before(async () => {
  stack = await startStack({ gatewayEnv: { PUBLIC_ORIGIN: ORIGIN } });
  pages = (await readdir(join(repoRoot, 'docs'))).filter((file) => file.endsWith('.md')).map((file) => file.slice(0, -3));
});
after(() => stack.stop());

/** A link in the documents names the public origin; this stack serves it. */
const get = (url: string, headers: Record<string, string> = {}) => fetch(`${stack.gatewayUrl}${url.startsWith(ORIGIN) ? url.slice(ORIGIN.length) : url}`, { headers });

const source = async (page: string) => (await readFile(join(repoRoot, 'docs', `${page}.md`), 'utf8')).replaceAll('{origin}', ORIGIN);

test('llms.txt: a title, a summary, sections of links to every page, each link resolving', async () => {
  const response = await get('/llms.txt');
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/plain; charset=utf-8');
  const text = await response.text();
  assert.match(text, /^# Herald\n\n> \S.+\n/);
  assert.match(text, /\n## Guides\n\n- \[/);
  assert.match(text, /\n## Optional\n\n- \[/);

  const links = [...text.matchAll(/^- \[([^\]]+)\]\(([^)]+)\): \S/gm)].map((match) => ({ title: match[1] ?? '', url: match[2] ?? '' }));
  const listed = links.flatMap(({ url }) => /\/docs\/([a-z0-9-]+)\.md$/.exec(url)?.[1] ?? []);
  assert.ok(pages.length >= 14, `${pages.length} pages`);
  assert.deepEqual([...listed].sort(), [...pages].sort(), 'every page, once');
  for (const { title, url } of links) {
    assert.ok(url.startsWith(`${ORIGIN}/`), url);
    const linked = await get(url);
    assert.equal(linked.status, 200, url);
    if (url.endsWith('.md')) {
      assert.equal(linked.headers.get('content-type'), MARKDOWN, url);
      assert.ok((await linked.text()).startsWith(`# ${title}\n\n> `), `${url} is titled ${title}`);
    } else {
      assert.equal(linked.headers.get('content-type'), 'application/json; charset=utf-8', url);
      await linked.body?.cancel();
    }
  }
});

test('a page is Markdown with .md or Accept: text/markdown, HTML otherwise', async () => {
  for (const page of pages) {
    const markdown = await source(page);
    const byExtension = await get(`/docs/${page}.md`);
    assert.equal(byExtension.status, 200);
    assert.equal(byExtension.headers.get('content-type'), MARKDOWN);
    assert.equal(byExtension.headers.get('vary'), 'Accept');
    assert.equal(await byExtension.text(), markdown);

    const byAccept = await get(`/docs/${page}`, { accept: 'text/markdown' });
    assert.equal(byAccept.headers.get('content-type'), MARKDOWN);
    assert.equal(byAccept.headers.get('vary'), 'Accept');
    assert.equal(await byAccept.text(), markdown);

    for (const accept of [undefined, 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', '*/*', 'text/markdown;q=0.5, text/html']) {
      const html = await get(`/docs/${page}`, accept ? { accept } : {});
      assert.equal(html.status, 200);
      assert.equal(html.headers.get('content-type'), HTML, `${page} with Accept ${accept}`);
      assert.equal(html.headers.get('vary'), 'Accept');
      const body = await html.text();
      assert.match(body, /^<!doctype html>\n<html lang="en">/);
      const title = /^# (.+)$/m.exec(markdown)?.[1] ?? '';
      assert.ok(body.includes(`<h1 id=`), page);
      assert.ok(body.includes(`<link rel="alternate" type="text/markdown" href="/docs/${page}.md">`), page);
      assert.ok(body.includes(`<title>${title.replaceAll('<', '&lt;').replaceAll('>', '&gt;')} · Herald documentation</title>`), page);
    }
  }
});

test('HTML is rendered from the Markdown and escapes it', async () => {
  const html = await (await get('/docs/authentication')).text();
  assert.ok(html.includes('<code>pk_&lt;id&gt;.&lt;secret&gt;</code>'));
  assert.ok(!html.includes('<id>'));
  assert.match(html, /<table>/);
  const quickStart = await (await get('/docs/quick-start')).text();
  assert.match(quickStart, /<pre><code class="language-sh">curl -s \$HERALD_URL\/api\/v1\/server\/identity -H &quot;Authorization: Bearer \$HERALD_KEY&quot;/);
});

test('the errors page has a section for every code the errors link to', async () => {
  const codes: ErrorCode[] = [
    'invalid_request',
    'unauthorized',
    'forbidden',
    'subscription_required',
    'plan_upgrade_required',
    'plan_limit_exceeded',
    'partner_decision_required',
    'not_found',
    'method_not_allowed',
    'conflict',
    'gone',
    'rate_limited',
    'internal_error',
    'unavailable',
  ];
  const html = await (await get('/docs/errors')).text();
  for (const code of codes) {
    const status = new HeraldError(code, 'x').status;
    assert.ok(html.includes(`<h2 id="${code}"><code>${code}</code></h2>`), code);
    assert.match(html, new RegExp(`id="${code}"><code>${code}</code></h2>\\n<p><strong>${status}\\.</strong>`), `${code} says ${status}`);
  }
  // An error's own documentation link lands on its section.
  const unauthorized = await fetch(`${stack.gatewayUrl}/api/v1/server/identity`);
  const { documentation } = (await unauthorized.json()) as { documentation: string };
  assert.equal(documentation, `${ORIGIN}/docs/errors#unauthorized`);
});

test('an unknown page is the standard 404; the index lists every page; responses are cacheable', async () => {
  for (const path of ['/docs/nope', '/docs/nope.md', '/docs/errors.txt']) {
    const response = await get(path);
    assert.equal(response.status, 404);
    const page = path.slice('/docs/'.length);
    assert.deepEqual(await response.json(), {
      error: 'Not found',
      code: 'not_found',
      status: 404,
      message: `No documentation page "${page}".`,
      hint: `Every page is listed at ${ORIGIN}/llms.txt and ${ORIGIN}/docs.`,
      documentation: `${ORIGIN}/docs/errors#not_found`,
    });
  }
  const index = await get('/docs');
  assert.equal(index.headers.get('content-type'), HTML);
  const html = await index.text();
  for (const page of pages) assert.ok(html.includes(`href="${ORIGIN}/docs/${page}"`), page);

  const first = await get('/docs/limits.md');
  const etag = first.headers.get('etag') ?? '';
  assert.equal(first.headers.get('cache-control'), 'public, max-age=300');
  assert.equal((await get('/docs/limits.md', { 'if-none-match': etag })).status, 304);
});
