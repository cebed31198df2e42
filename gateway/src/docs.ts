import { readdirSync, readFileSync } from 'node:fs';

import { HeraldError } from '@herald/errors';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Marked, type Tokens } from 'marked';

import { escapeHtml } from './html.js';
import { StaticBody } from './static-body.js';

/**
 * The documentation pages (docs/*.md at the repository root) and the site index for agents,
 * /llms.txt (llmstxt.org). Each page is served as Markdown (`.md`, or `Accept: text/markdown`) and
 * as HTML rendered from the same Markdown; both are built once at startup. `{origin}` in a page
 * becomes PUBLIC_ORIGIN.
 */

const DOCS_DIR = new URL('../../../docs/', import.meta.url);

/** Where each page is listed in llms.txt and the navigation; a page not named here goes last. */
const SECTIONS: Array<{ name: string; pages: string[] }> = [
  { name: 'Guides', pages: ['quick-start', 'authentication', 'members', 'console', 'approval-flow', 'approvers', 'mcp', 'agents', 'load-testing', 'operating'] },
  { name: 'Running Herald', pages: ['configuration', 'local-infrastructure', 'kubernetes', 'cli', 'testing', 'openapi'] },
  {
    name: 'Reference',
    pages: [
      'errors',
      'limits',
      'reliability',
      'account',
      'subscribers',
      'browser-sdk',
      'server-sdks',
      'notifications',
      'campaigns',
      'templates',
      'segments',
      'flows',
      'engagement',
      'policy',
      'keys-and-enrollment',
      'approver-devices',
      'questions',
      'ask',
      'decisions',
      'slack',
      'email',
      'escalation',
      'audit',
      'webhooks',
    ],
  },
  {
    name: 'Agent frameworks',
    pages: [
      'agents-vercel-ai-sdk',
      'agents-mastra',
      'agents-langgraph-js',
      'agents-openai-agents-js',
      'agents-eve',
      'agents-langgraph-python',
      'agents-crewai',
      'agents-openai-agents-python',
    ],
  },
];

const MARKDOWN = 'text/markdown; charset=utf-8';
const HTML = 'text/html; charset=utf-8';
const pagePattern = /^[a-z0-9-]+$/;

interface Page {
  slug: string;
  title: string;
  summary: string;
  markdown: StaticBody;
  html: StaticBody;
}

/** An id a link can point at: `invalid_request` for "`invalid_request`", `rate-limits` for "Rate limits". */
const anchorOf = (text: string): string =>
  text
    .toLowerCase()
    .replace(/[`*]/g, '')
    .replace(/[^a-z0-9_ -]/g, '')
    .trim()
    .replace(/\s+/g, '-');

const marked = new Marked({
  renderer: {
    heading(this: { parser: { parseInline(tokens: Tokens.Heading['tokens']): string } }, { tokens, depth, text }: Tokens.Heading): string {
      return `<h${depth} id="${escapeHtml(anchorOf(text))}">${this.parser.parseInline(tokens)}</h${depth}>\n`;
    },
    // The pages are text: anything that looks like markup (`pk_<id>`) is shown, never interpreted.
    html({ text }: Tokens.HTML | Tokens.Tag): string {
      return escapeHtml(text);
    },
  },
});

/** `# Title`, then `> summary` (both required: llms.txt lists them). */
function headOf(slug: string, markdown: string): { title: string; summary: string } {
  const match = /^# (.+)\n\n> (.+)\n/.exec(markdown);
  if (!match?.[1] || !match[2]) throw new Error(`docs/${slug}.md must start with "# Title", a blank line and "> summary"`);
  return { title: match[1].trim(), summary: match[2].trim() };
}

/** `pages`: the navigation, in order. */
function htmlPage(title: string, body: string, pages: Array<{ slug: string; title: string }>, alternate: string): string {
  const nav = pages.map((page) => `<li><a href="/docs/${page.slug}">${escapeHtml(page.title)}</a></li>`).join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Herald documentation</title>
<link rel="alternate" type="text/markdown" href="${escapeHtml(alternate)}">
<style>
body{font-family:system-ui,sans-serif;line-height:1.55;margin:0;color:#1a1a1a;background:#fff;display:flex;flex-wrap:wrap}
nav{flex:0 0 14rem;padding:1rem;border-right:1px solid #ddd;font-size:.95rem}
nav ul{list-style:none;padding:0;margin:.5rem 0}nav li{margin:.25rem 0}
main{flex:1 1 30rem;max-width:52rem;padding:1rem 1.5rem;min-width:0}
pre{background:#f4f4f4;padding:.75rem;overflow-x:auto;border-radius:.25rem}
code{font-family:ui-monospace,monospace;font-size:.92em}
table{border-collapse:collapse;display:block;overflow-x:auto}th,td{border:1px solid #ccc;padding:.3rem .5rem;text-align:left;vertical-align:top}
a{color:#0b57d0}a:focus-visible{outline:3px solid #0b57d0;outline-offset:2px}
</style>
</head>
<body>
<nav aria-label="Documentation"><a href="/docs"><strong>Herald documentation</strong></a><ul>${nav}</ul><a href="/openapi.json">OpenAPI</a> · <a href="/llms.txt">llms.txt</a></nav>
<main>
${body}
</main>
</body>
</html>
`;
}

/** Whether the client asked for Markdown over HTML (a browser's Accept names text/html first). */
function prefersMarkdown(accept: string | undefined): boolean {
  let markdown = 0;
  let html = 0;
  for (const part of (accept ?? '').toLowerCase().split(',')) {
    const [type = '', ...parameters] = part.split(';').map((piece) => piece.trim());
    const q = Number(parameters.find((parameter) => parameter.startsWith('q='))?.slice(2) ?? '1');
    if (Number.isNaN(q)) continue;
    if (type === 'text/markdown') markdown = Math.max(markdown, q);
    if (type === 'text/html') html = Math.max(html, q);
  }
  return markdown > 0 && markdown >= html;
}

function sectionsOf(pages: Page[]): Array<{ name: string; pages: Page[] }> {
  const bySlug = new Map(pages.map((page) => [page.slug, page]));
  const listed = new Set(SECTIONS.flatMap((section) => section.pages));
  const sections = SECTIONS.map((section) => ({
    name: section.name,
    pages: section.pages.flatMap((slug) => bySlug.get(slug) ?? []),
  }));
  const others = pages.filter((page) => !listed.has(page.slug));
  return others.length > 0 ? [...sections, { name: 'More', pages: others }] : sections;
}

/** llms.txt: H1, summary, then a section of links per group of pages. `extension`: '.md' for agents, '' for the HTML index. */
function indexMarkdown(origin: string, pages: Page[], extension: string): string {
  const sections = sectionsOf(pages)
    .map((section) => `## ${section.name}\n\n${section.pages.map((page) => `- [${page.title}](${origin}/docs/${page.slug}${extension}): ${page.summary}`).join('\n')}`)
    .join('\n\n');
  return `# Herald

> Herald lets a program, usually an AI agent, reach a real person and wait for their answer (fail-closed: silence is never approval), check its actions against a workspace policy, and send web push notifications to a site's subscribers. REST under ${origin}/api/v1/server with a Bearer API key.

Every page is Markdown at its \`.md\` URL (or with \`Accept: text/markdown\`). Errors share one shape and link to ${origin}/docs/errors.

${sections}

## Optional

- [OpenAPI 3.1 description](${origin}/openapi.json): every REST operation, its schemas, errors and the webhook payloads (also as YAML: ${origin}/openapi.yaml)
`;
}

/** Reads and renders every page; a page without its title and summary stops the gateway at startup. */
function loadPages(origin: string): Page[] {
  const files = readdirSync(DOCS_DIR).filter((file) => file.endsWith('.md'));
  const sources = files.map((file) => {
    const slug = file.slice(0, -'.md'.length);
    if (!pagePattern.test(slug)) throw new Error(`docs/${file}: page names are lowercase letters, digits and hyphens`);
    const markdown = readFileSync(new URL(file, DOCS_DIR), 'utf8').replaceAll('{origin}', origin);
    return { slug, markdown, ...headOf(slug, markdown) };
  });
  const order = SECTIONS.flatMap((section) => section.pages);
  const rank = (slug: string) => (order.includes(slug) ? order.indexOf(slug) : order.length);
  sources.sort((a, b) => rank(a.slug) - rank(b.slug) || a.slug.localeCompare(b.slug));
  return sources.map(({ slug, title, summary, markdown }) => ({
    slug,
    title,
    summary,
    markdown: new StaticBody(markdown, MARKDOWN),
    html: new StaticBody(htmlPage(title, marked.parse(markdown, { async: false }), sources, `/docs/${slug}.md`), HTML),
  }));
}

function sendHtml(request: FastifyRequest, reply: FastifyReply, body: StaticBody): FastifyReply {
  reply
    .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' https: data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    .header('x-content-type-options', 'nosniff');
  return body.send(request, reply, true);
}

export async function registerDocs(app: FastifyInstance, publicOrigin: string): Promise<void> {
  const pages = loadPages(publicOrigin);
  const bySlug = new Map(pages.map((page) => [page.slug, page]));
  const llms = new StaticBody(indexMarkdown(publicOrigin, pages, '.md'), 'text/plain; charset=utf-8');
  const indexSource = indexMarkdown(publicOrigin, pages, '');
  const index = {
    markdown: new StaticBody(indexSource, MARKDOWN),
    html: new StaticBody(htmlPage('Contents', marked.parse(indexSource, { async: false }), pages, '/llms.txt'), HTML),
  };
  const config = { access: { public: true } } as const;

  app.get('/llms.txt', { config }, async (request, reply) => llms.send(request, reply));
  app.get('/docs', { config }, async (request, reply) =>
    prefersMarkdown(request.headers.accept) ? index.markdown.send(request, reply, true) : sendHtml(request, reply, index.html),
  );
  app.get<{ Params: { page: string } }>('/docs/:page', { config }, async (request, reply) => {
    const requested = request.params.page;
    const asMarkdown = requested.endsWith('.md');
    const page = bySlug.get(asMarkdown ? requested.slice(0, -'.md'.length) : requested);
    if (!page) {
      throw new HeraldError('not_found', `No documentation page "${requested}".`, {
        title: 'Not found',
        hint: `Every page is listed at ${publicOrigin}/llms.txt and ${publicOrigin}/docs.`,
      });
    }
    if (asMarkdown) return page.markdown.send(request, reply, true);
    return prefersMarkdown(request.headers.accept) ? page.markdown.send(request, reply, true) : sendHtml(request, reply, page.html);
  });
}
