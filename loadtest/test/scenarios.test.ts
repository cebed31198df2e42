import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { freePort, repoRoot, type SendingHarness } from '@herald/testkit';

import { startLoadStack } from '../runner/local-stack.js';
import type { Summary } from '../runner/summary.js';
import { JOURNEYS } from '../scenarios/index.js';

// Every journey's smoke form through `npm run load`'s entry point against one local stack, so no
// scenario rots: exit 0, every threshold held, the JSON and text summaries written. Then the
// runner's refusals and a crossed threshold (exit 99).

let harness: SendingHarness;
let peerCaFile: string;
before(async () => {
  harness = await startLoadStack();
  peerCaFile = join(await mkdtemp(join(tmpdir(), 'herald-load-peer-')), 'ca.pem');
  await writeFile(peerCaFile, harness.peer.ca ?? '');
});
// A stack that failed to start has nothing to stop (and the failure is the before hook's).
after(async () => {
  if (harness !== undefined) await harness.stop();
});

interface Exit {
  code: number;
  stdout: string;
  stderr: string;
}

function load(args: string[], env: Record<string, string> = {}): Promise<Exit> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['loadtest/dist/run.js', ...args],
      { cwd: repoRoot, env: { ...process.env, HERALD_URL: harness.stack.gatewayUrl, PUSH_PEER_URL: harness.peer.origin, PUSH_PEER_CA_FILE: peerCaFile, ENGAGEMENT_TOKEN_SECRET: harness.stack.engagementTokenSecret, ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

async function summaryIn(dir: string): Promise<{ summary: Summary; text: string; files: string[] }> {
  const files = (await readdir(dir)).sort();
  const json = files.find((file) => file.endsWith('.json'));
  const txt = files.find((file) => file.endsWith('.txt'));
  assert.ok(json && txt, `summaries in ${dir}: ${files.join(', ')}`);
  return { summary: JSON.parse(await readFile(join(dir, json), 'utf8')) as Summary, text: await readFile(join(dir, txt), 'utf8'), files };
}

for (const name of Object.keys(JOURNEYS)) {
  test(`${name}: the smoke form holds every threshold`, async () => {
    const dir = await mkdtemp(join(tmpdir(), `herald-load-${name}-`));
    const exit = await load([name, '--smoke', '--summary-dir', dir]);
    assert.equal(exit.code, 0, `${exit.stdout}\n${exit.stderr}`);
    const { summary, text, files } = await summaryIn(dir);
    assert.equal(files.length, 2);
    assert.match(files[0] as string, new RegExp(`^${name}-smoke-\\d{4}-\\d{2}-\\d{2}T[\\d-]+Z\\.json$`));
    assert.deepEqual({ scenario: summary.scenario, form: summary.form, baseUrl: summary.baseUrl, ok: summary.ok }, { scenario: name, form: 'smoke', baseUrl: harness.stack.gatewayUrl, ok: true });
    assert.ok(summary.thresholds.length >= 4);
    assert.deepEqual(
      summary.thresholds.filter((result) => !result.ok || result.actual === undefined),
      [],
    );
    assert.ok(summary.checks.length > 0 && summary.checks.every((entry) => entry.passes > 0 && entry.fails === 0), JSON.stringify(summary.checks));
    assert.ok((summary.metrics.http_reqs?.values.count ?? 0) > 0);
    assert.equal(summary.metrics.iteration_errors, undefined);
    // The text summary is what was printed, and says where the files went.
    assert.ok(exit.stdout.includes(text), 'the text summary is printed');
    assert.match(text, /^thresholds: all held$/m);
    assert.ok(exit.stderr.includes(`summary written to ${join(dir, files[0] as string)} and ${join(dir, files[1] as string)}`), exit.stderr);
  });
}

test('a crossed threshold exits 99 and names it; the summary is still written', async () => {
  // Nothing listens there: setup works (admin CLI), every request fails.
  const dir = await mkdtemp(join(tmpdir(), 'herald-load-crossed-'));
  const exit = await load(['identity', '--smoke', '--summary-dir', dir], { HERALD_URL: `http://127.0.0.1:${await freePort()}` });
  assert.equal(exit.code, 99, exit.stderr);
  const { summary } = await summaryIn(dir);
  assert.equal(summary.ok, false);
  const crossed = summary.thresholds.filter((result) => !result.ok).map((result) => `${result.key} ${result.expression}`);
  assert.deepEqual(crossed, [
    'checks rate==1',
    'http_req_failed rate==0',
    'http_req_duration{name:identity,status:429} p(95)<10000',
    'identity_admitted count>0',
    'identity_rate_limited count>0',
  ]);
  assert.match(exit.stderr, /thresholds crossed: checks rate==1; http_req_failed rate==0; /);
  // Every request is explained: status 0 (no connection) at the identity endpoint.
  const requests = summary.metrics.http_reqs?.values.count ?? 0;
  assert.ok(requests > 100);
  assert.equal(summary.metrics['http_reqs{name:identity,status:0}']?.values.count, requests);
  assert.match(exit.stdout, /^thresholds: CROSSED$/m);
});

test("the chart's loadTest.journeys accepts exactly these journeys", async () => {
  const schema = JSON.parse(await readFile(join(repoRoot, 'charts/herald/values.schema.json'), 'utf8')) as {
    properties: { loadTest: { properties: { journeys: { items: { enum: string[] } } } } };
  };
  assert.deepEqual(schema.properties.loadTest.properties.journeys.items.enum.sort(), Object.keys(JOURNEYS).sort());
});

test('usage errors exit 2: no journey, an unknown one, a target off this machine without --remote', async () => {
  const none = await load([]);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /^name one journey\nusage: npm run load -- <journey>/);
  const unknown = await load(['nosuch', '--smoke']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /^no journey "nosuch"\n/);
  const remote = await load(['identity', '--smoke'], { HERALD_URL: 'http://herald.example.test' });
  assert.equal(remote.code, 2);
  assert.match(remote.stderr, /^HERALD_URL http:\/\/herald\.example\.test is not on this machine: pass --remote to load it on purpose\n/);
});
