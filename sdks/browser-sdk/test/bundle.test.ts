import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

// The build's output (npm run build bundles it): the size budgets, the manifest's SRI hashes,
// the classic scripts' syntax level, and the typings.

const file = (path: string) => readFileSync(fileURLToPath(new URL(`../../${path}`, import.meta.url)));
const gzipped = (path: string) => gzipSync(file(path), { level: 9 }).length;

test('the SDK is at most 8 KB and the service worker at most 6 KB gzipped', () => {
  assert.ok(gzipped('dist/bundle/herald.mjs') <= 8 * 1024, `herald.mjs is ${gzipped('dist/bundle/herald.mjs')} bytes gzipped`);
  assert.ok(gzipped('dist/bundle/herald.js') <= 8 * 1024, `herald.js is ${gzipped('dist/bundle/herald.js')} bytes gzipped`);
  assert.ok(gzipped('dist/bundle/herald-sw.js') <= 6 * 1024, `herald-sw.js is ${gzipped('dist/bundle/herald-sw.js')} bytes gzipped`);
});

test('the manifest lists each file with its size and SRI hash', () => {
  const manifest = JSON.parse(file('dist/bundle/manifest.json').toString('utf8')) as Record<string, { bytes: number; gzipBytes: number; integrity: string }>;
  assert.deepEqual(Object.keys(manifest).sort(), ['herald-page.js', 'herald-sw.js', 'herald.js', 'herald.mjs']);
  for (const [name, entry] of Object.entries(manifest)) {
    const content = file(`dist/bundle/${name}`);
    assert.deepEqual(entry, {
      bytes: content.length,
      gzipBytes: gzipped(`dist/bundle/${name}`),
      integrity: `sha384-${createHash('sha384').update(content).digest('base64')}`,
    });
  }
});

test('the classic scripts are ES5 (the minimum browsers), the module exports the factory', () => {
  for (const name of ['herald.js', 'herald-sw.js', 'herald-page.js']) {
    const code = file(`dist/bundle/${name}`).toString('utf8');
    // What esbuild cannot lower and Firefox 44 / Chrome 50 cannot run.
    const modern = /\b(const|let|class|async|await)\s|=>/.exec(code);
    assert.equal(modern, null, `${name} has ${modern?.[0]} at ${modern?.index}`);
  }
  // One global, the SDK; TypeScript's helpers stay inside its closure.
  assert.ok(file('dist/bundle/herald.js').toString('utf8').startsWith('var Herald=(function(){'));
  assert.ok(file('dist/bundle/herald-sw.js').toString('utf8').startsWith('(function(){'));
  assert.ok(/export\{[^}]*\bcreateHerald\b/.test(file('dist/bundle/herald.mjs').toString('utf8')), 'herald.mjs exports createHerald');
});

test('the typings describe the spec’s surface', () => {
  const types = file('dist/types/sdk/index.d.ts').toString('utf8');
  for (const member of ['promptForPermission', 'subscribe', 'unsubscribe', 'setExternalId', 'setTags', 'processRetryQueue', 'isSupported']) {
    assert.match(types, new RegExp(`\\b${member}\\(`), member);
  }
  for (const option of ['siteKey', 'apiUrl', 'autoPrompt', 'promptDelay', 'debug', 'onSubscribe', 'onPermissionDenied', 'onNotSupported', 'onNotificationClick']) {
    assert.match(types, new RegExp(`\\b${option}\\??:`), option);
  }
  assert.match(types, /export declare function createHerald\(config: HeraldConfig\): Herald;/);
});
