import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';

import { repoRoot } from '@herald/testkit';

// Every link between the repository's Markdown files resolves: README.md, ARCHITECTURE.md, the
// docs/ pages the gateway serves and the packages' READMEs. A relative link names a file that exists
// (and, into a Markdown file, a heading that exists); a page's `{origin}/docs/<page>#<anchor>` (or
// `/docs/<page>`) names a docs/ page and one of its headings. External links are not fetched.

/** A heading's anchor, both ways it is made: GitHub's (punctuation dropped, each space a hyphen) and the gateway's (gateway/src/docs.ts). */
function anchorsOf(heading: string): string[] {
  const text = heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .toLowerCase()
    .trim();
  const github = text.replace(/[^\p{L}\p{N}\p{M}\p{Pc} -]/gu, '').replace(/ /g, '-');
  const served = text
    .replace(/[`*]/g, '')
    .replace(/[^a-z0-9_ -]/g, '')
    .trim()
    .replace(/\s+/g, '-');
  return [github, served];
}

/** Each line of the Markdown, or null inside a fenced code block. */
function outsideFences(markdown: string): Array<string | null> {
  let fence: string | null = null;
  return markdown.split('\n').map((line) => {
    const marker = /^\s*(```+|~~~+)/.exec(line)?.[1];
    if (marker && (fence === null || marker.startsWith(fence))) {
      fence = fence === null ? marker : null;
      return null;
    }
    return fence === null ? line : null;
  });
}

function anchorsIn(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of outsideFences(markdown)) {
    const heading = line === null ? undefined : /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line)?.[1];
    if (!heading) continue;
    for (const anchor of new Set(anchorsOf(heading))) {
      const count = seen.get(anchor) ?? 0;
      seen.set(anchor, count + 1);
      anchors.add(count === 0 ? anchor : `${anchor}-${count}`);
    }
  }
  return anchors;
}

interface Link {
  line: number;
  target: string;
}

function linksIn(markdown: string): Link[] {
  const links: Link[] = [];
  outsideFences(markdown).forEach((line, index) => {
    // Inline code spans are text, not links.
    const text = (line ?? '').replace(/(`+)(?:(?!\1).)+?\1/g, (span) => ' '.repeat(span.length));
    for (const match of text.matchAll(/!?\[(?:[^\]`]|`[^`]*`)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ line: index + 1, target: match[1] ?? '' });
    }
  });
  return links;
}

/** Why `target`, linked from `file` (relative to the repository), does not resolve; null when it does. */
export function brokenReason(file: string, target: string, read: (path: string) => string | null): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null; // https:, mailto:, ...
  const [path = '', anchor] = target.split('#', 2) as [string, string | undefined];
  const page = /^(?:\{origin\})?\/docs\/([a-z0-9-]+?)(?:\.md)?\/?$/.exec(path)?.[1];
  let resolved: string;
  if (page !== undefined) resolved = join('docs', `${page}.md`);
  else if (path.startsWith('{origin}') || path.startsWith('/')) return null; // an API route or a page the gateway makes
  else if (path === '') resolved = file;
  else resolved = join(dirname(file), decodeURIComponent(path));
  if (resolved.startsWith('..')) return `${target}: outside the repository`;
  const text = read(resolved);
  if (text === null) return `${target}: no file ${resolved}`;
  if (anchor === undefined || !resolved.endsWith('.md')) return null;
  return anchorsIn(text).has(anchor) ? null : `${target}: no heading #${anchor} in ${resolved}`;
}

export function brokenLinks(file: string, read: (path: string) => string | null): string[] {
  const text = read(file) ?? '';
  return linksIn(text).flatMap(({ line, target }) => {
    const reason = brokenReason(file, target, read);
    return reason === null ? [] : [`${file}:${line}: ${reason}`];
  });
}

const readRepo = (path: string): string | null => {
  const full = join(repoRoot, path);
  if (!existsSync(full)) return null;
  try {
    return readFileSync(full, 'utf8');
  } catch {
    return ''; // a directory
  }
};

test('every link in the Markdown files resolves to a file and heading that exist', () => {
  const files = execFileSync('git', ['ls-files', '*.md'], { cwd: repoRoot, encoding: 'utf8' })
    .split('\n')
    .filter((file) => file !== '' && !file.includes('node_modules') && !file.includes('eve-fixture') && existsSync(join(repoRoot, file)));
  assert.ok(files.includes('README.md') && files.includes('docs/errors.md'), files.join(' '));
  const checked = files.flatMap((file) => linksIn(readRepo(file) ?? '')).length;
  assert.ok(checked > 100, `${checked} links`);
  assert.deepEqual(
    files.flatMap((file) => brokenLinks(file, readRepo)),
    [],
  );
});

test('the checker finds what is broken and nothing else', () => {
  const files: Record<string, string> = {
    'README.md': [
      '# Herald',
      '## Two commands',
      '## Tests: `npm test`',
      '[ok](docs/a.md) [ok](docs/a.md#the-part) [ok](#two-commands) [ok](#tests-npm-test) [ok](https://example.com/x)',
      '[bad](docs/missing.md) [bad](docs/a.md#nowhere) [bad](#nowhere) [bad](../outside.md)',
      '`[not a link](nowhere.md)`',
      '```',
      '[not a link](nowhere.md)',
      '## Not a heading',
      '```',
      '[bad](#not-a-heading)',
    ].join('\n'),
    'docs/a.md': ['# A', '', '> a', '', '## The part', '', '[ok]({origin}/docs/b#b-1) [ok](/docs/b) [ok]({origin}/api/v1/server/send)', '[bad]({origin}/docs/c) [bad]({origin}/docs/b#b-2) [ok](images/x.png) [bad](images/y.png)'].join('\n'),
    'docs/b.md': ['# B', '## B'].join('\n'),
    'docs/images/x.png': '',
  };
  const read = (path: string) => files[path] ?? null;
  assert.deepEqual(brokenLinks('README.md', read), [
    'README.md:5: docs/missing.md: no file docs/missing.md',
    'README.md:5: docs/a.md#nowhere: no heading #nowhere in docs/a.md',
    'README.md:5: #nowhere: no heading #nowhere in README.md',
    'README.md:5: ../outside.md: outside the repository',
    'README.md:11: #not-a-heading: no heading #not-a-heading in README.md',
  ]);
  assert.deepEqual(brokenLinks('docs/a.md', read), [
    'docs/a.md:8: {origin}/docs/c: no file docs/c.md',
    'docs/a.md:8: {origin}/docs/b#b-2: no heading #b-2 in docs/b.md',
    'docs/a.md:8: images/y.png: no file docs/images/y.png',
  ]);
});
