import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { freePort, repoRoot, type SendingHarness } from '@herald/testkit';

import { JOURNEY_NAMES, type Provision } from '../k6/lib/provision-file.js';
import { startLoadStack } from '../runner/local-stack.js';
import { parseThresholds } from '../runner/thresholds.js';
import { declare, inspectScript } from '../runtime/host.js';
import { K6_BUILTIN_METRICS, k6ScenarioProblems } from '../runtime/options.js';

// The k6 scripts of loadtest/k6, verified without the k6 binary three ways: their types against
// @types/k6 (tsc, strict, no DOM, no Node), static checks (imports, thresholds, executors), and
// every journey's smoke form run on Herald's k6-compatible runtime against one local stack.

const K6_DIR = join(repoRoot, 'loadtest', 'k6');
const TSC = join(repoRoot, 'node_modules', '.bin', 'tsc');
const ALLOWED_MODULES = new Set(['k6', 'k6/http', 'k6/metrics', 'k6/execution', 'k6/crypto', 'k6/encoding', 'k6/data', 'k6/timers']);

interface Exit {
  code: number;
  stdout: string;
  stderr: string;
}

function exec(file: string, args: string[], env: Record<string, string> = {}, timeout = 90_000): Promise<Exit> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: repoRoot, env: { ...process.env, ...env }, timeout }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

async function scriptFiles(): Promise<string[]> {
  const entries = await readdir(K6_DIR, { recursive: true });
  return entries.filter((entry) => entry.endsWith('.ts')).sort();
}

describe('types', () => {
  test('every script type-checks against @types/k6 (strict, no DOM, no Node types)', async () => {
    const result = await exec(TSC, ['--noEmit', '-p', K6_DIR]);
    assert.equal(result.code, 0, result.stdout + result.stderr);
  });

  test('the check has teeth: a wrong k6 call and a Node API are type errors', async () => {
    const dir = await mkdtemp(join(K6_DIR, '.typecheck-'));
    try {
      await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ extends: '../tsconfig.json', include: ['*.ts'] }));
      await writeFile(join(dir, 'bad.ts'), "import http from 'k6/http';\nhttp.get(42);\nprocess.exit(1);\n");
      const result = await exec(TSC, ['--noEmit', '-p', dir]);
      assert.equal(result.code, 2);
      assert.match(result.stdout, /bad\.ts\(2,10\): error TS2345: Argument of type 'number' is not assignable to parameter of type 'string/);
      assert.match(result.stdout, /bad\.ts\(3,1\): error TS2591: Cannot find name 'process'/);
    } finally {
      await exec('rm', ['-rf', dir]);
    }
  });
});

/** A provisioning file with well-formed placeholders: enough for the init context, never for requests. */
async function placeholderProvision(): Promise<string> {
  const keys = (count: number): string[] => Array.from({ length: count }, (_, index) => `hk_placeholder_${index}`);
  const provision: Provision = {
    version: 1,
    createdAt: new Date().toISOString(),
    siteOrigin: 'https://load.example.test',
    push: { origin: null, keys: [{ p256dh: 'p', auth: 'a' }] },
    workspaces: [],
    identity: { workspaceId: 'ws_placeholder', apiKey: 'hk_placeholder', limitPerMinute: 100 },
    subscribe: { siteKeys: keys(4) },
    send: { apiKey: 'hk_a', siteKey: 'pk_a' },
    campaign: { apiKey: 'hk_a', siteKey: 'pk_a' },
    engagement: { workspaceId: 'ws_a', siteId: 'site_a', apiKey: 'hk_a', siteKey: 'pk_a' },
    approval: { keys: keys(2) },
    authorize: { keys: keys(4) },
    mcp: { keys: keys(2) },
  };
  const path = join(await mkdtemp(join(tmpdir(), 'herald-k6-static-')), 'provision.json');
  await writeFile(path, JSON.stringify(provision));
  return path;
}

describe('static checks', () => {
  test('imports: only k6 modules of the allow-list and relative .ts modules of loadtest/k6', async () => {
    const found: string[] = [];
    for (const file of await scriptFiles()) {
      const text = await readFile(join(K6_DIR, file), 'utf8');
      assert.doesNotMatch(text, /\brequire\s*\(|\bimport\s*\(/, `${file}: no require() or dynamic import`);
      for (const [, specifier] of text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+['"]([^'"]+)['"]/gm)) {
        found.push(specifier as string);
        const relative = /^\.\.?\//.test(specifier as string);
        assert.ok(ALLOWED_MODULES.has(specifier as string) || (specifier === 'k6/options' && /import type/.test(text)) || (relative && (specifier as string).endsWith('.ts')), `${file}: import "${specifier}"`);
        if (relative) assert.ok(!(specifier as string).startsWith('../'), `${file}: "${specifier}" leaves loadtest/k6`);
      }
    }
    assert.ok(found.includes('k6/http') && found.includes('k6/crypto') && found.includes('./lib/config.ts'), found.join(', '));
  });

  for (const form of ['smoke', 'full'] as const) {
    test(`${form} forms: every threshold parses with the runner's parser and names a k6 or declared metric; every scenario is a k6 executor with its required fields`, async () => {
      const provision = await placeholderProvision();
      for (const journey of JOURNEY_NAMES) {
        const ready = await inspectScript(join(K6_DIR, `${journey}.ts`), { HERALD_PROVISION: provision, ...(form === 'smoke' ? { HERALD_SMOKE: '1' } : {}) });
        const options = ready.options as { scenarios: Record<string, { exec?: string }>; thresholds: Record<string, string[]> };
        assert.ok(ready.exports.includes('setup') && ready.exports.includes('teardown') && ready.exports.includes('handleSummary'), `${journey}: ${ready.exports.join(', ')}`);
        for (const [name, scenario] of Object.entries(options.scenarios)) {
          assert.deepEqual(k6ScenarioProblems(name, scenario), [], journey);
          assert.ok(ready.exports.includes(scenario.exec ?? 'default'), `${journey}: scenario ${name} runs ${scenario.exec ?? 'default'}`);
        }
        declare(ready.metrics);
        const declared = new Set(ready.metrics.map((metric) => metric.name));
        const parsed = parseThresholds(options.thresholds);
        assert.ok(parsed.length >= 5, `${journey}: ${parsed.length} thresholds`);
        for (const threshold of parsed) assert.ok(K6_BUILTIN_METRICS.has(threshold.metric.name) || declared.has(threshold.metric.name), `${journey}: ${threshold.key}`);
        assert.ok(Object.keys(options.thresholds).some((key) => key.startsWith('http_req_duration{name:')), `${journey}: a per-endpoint latency threshold`);
        assert.deepEqual(options.thresholds.http_req_failed, ['rate==0'], journey);
      }
    });
  }

  test('the static checks catch what k6 would refuse', () => {
    assert.deepEqual(k6ScenarioProblems('a', { executor: 'constant-arrival-rate', rate: 1, duration: '1s' }), ['scenario "a" (constant-arrival-rate) lacks preAllocatedVUs']);
    assert.deepEqual(k6ScenarioProblems('b', { executor: 'ramping-arrival-rate', stages: [], preAllocatedVUs: 1, vus: 2 }), ['scenario "b" (ramping-arrival-rate) has vus, which k6 does not know there']);
    assert.match(k6ScenarioProblems('c', { executor: 'open-model' })[0] ?? '', /^scenario "c": executor "open-model" is not one of k6's \(shared-iterations, per-vu-iterations, constant-vus/);
    assert.throws(() => parseThresholds({ http_req_duration: ['p95<300'] }), { message: 'threshold "p95<300" on http_req_duration is not <aggregate> <operator> <number>, e.g. p(95)<300' });
  });
});

describe('the smoke forms on the runtime, against a local stack', () => {
  let harness: SendingHarness;
  let provisionFile: string;
  let peerCaFile: string;
  before(async () => {
    harness = await startLoadStack();
    const dir = await mkdtemp(join(tmpdir(), 'herald-k6-'));
    peerCaFile = join(dir, 'ca.pem');
    await writeFile(peerCaFile, harness.peer.ca ?? '');
    provisionFile = join(dir, 'provision.json');
    const provisioned = await load(['provision', '--out', provisionFile]);
    assert.equal(provisioned.code, 0, provisioned.stderr);
    assert.equal(provisioned.stdout, `${provisionFile}\n`);
  });
  // A stack that failed to start has nothing to stop (and the failure is the before hook's).
  after(async () => {
    if (provisionFile !== undefined) await load(['retire', '--provision', provisionFile]);
    if (harness !== undefined) await harness.stop();
  });

  function load(args: string[], env: Record<string, string> = {}): Promise<Exit> {
    return exec(process.execPath, ['loadtest/dist/run.js', ...args], {
      HERALD_URL: harness.stack.gatewayUrl,
      PUSH_PEER_URL: harness.peer.origin,
      PUSH_PEER_CA_FILE: peerCaFile,
      ENGAGEMENT_TOKEN_SECRET: harness.stack.engagementTokenSecret,
      ...env,
    });
  }

  interface MetricData {
    values: Record<string, number>;
    thresholds?: Record<string, { ok: boolean }>;
  }
  interface SummaryData {
    runtime?: string;
    metrics: Record<string, MetricData>;
    root_group: { checks: Array<{ name: string; passes: number; fails: number }> };
  }

  async function summaryIn(dir: string): Promise<{ data: SummaryData; text: string; files: string[] }> {
    const files = (await readdir(dir)).sort();
    const json = files.find((file) => file.endsWith('.json'));
    const txt = files.find((file) => file.endsWith('.txt'));
    assert.ok(json && txt, `summaries in ${dir}: ${files.join(', ')}`);
    return { data: JSON.parse(await readFile(join(dir, json), 'utf8')) as SummaryData, text: await readFile(join(dir, txt), 'utf8'), files };
  }

  test('the provisioning file has every journey, sized for the full forms, readable by this user only', async () => {
    const provision = JSON.parse(await readFile(provisionFile, 'utf8')) as Provision;
    assert.deepEqual(Object.keys(provision).filter((key) => (JOURNEY_NAMES as readonly string[]).includes(key)).sort(), [...JOURNEY_NAMES].sort());
    assert.deepEqual([provision.subscribe.siteKeys.length, provision.approval.keys.length, provision.authorize.keys.length, provision.mcp.keys.length], [4, 2, 4, 2]);
    // identity, 4 subscribe sites, send, campaign, engagement, a workspace per approval key, authorize, mcp.
    assert.equal(provision.workspaces.length, 12);
    assert.equal(provision.push.origin, harness.peer.origin);
    const { stdout } = await exec('stat', ['-c', '%a', provisionFile]);
    assert.equal(stdout.trim(), '600');
  });

  for (const journey of JOURNEY_NAMES) {
    test(`${journey}: the smoke form holds every threshold`, async () => {
      const dir = await mkdtemp(join(tmpdir(), `herald-k6-${journey}-`));
      const exit = await load([journey, '--smoke', '--provision', provisionFile, '--summary-dir', dir]);
      assert.equal(exit.code, 0, `${exit.stdout}\n${exit.stderr}`);
      const { data, text, files } = await summaryIn(dir);
      assert.equal(files.length, 2);
      assert.match(files[0] as string, new RegExp(`^${journey}-smoke-\\d{4}-\\d{2}-\\d{2}T[\\d-]+Z\\.json$`));
      assert.equal(data.runtime, "Herald's k6-compatible runtime (loadtest/runtime, not k6)");
      const thresholds = Object.entries(data.metrics).flatMap(([name, metric]) => Object.entries(metric.thresholds ?? {}).map(([expression, result]) => ({ name, expression, ...result })));
      assert.ok(thresholds.length >= 5, JSON.stringify(thresholds));
      assert.deepEqual(thresholds.filter((result) => !result.ok), []);
      assert.ok(data.root_group.checks.length > 0 && data.root_group.checks.every((check) => check.passes > 0 && check.fails === 0), JSON.stringify(data.root_group.checks));
      assert.ok((data.metrics.http_reqs?.values.count ?? 0) > 0);
      assert.equal(data.metrics.iteration_errors, undefined, 'no iteration threw');
      // The text is what was printed, labelled as this runtime's, and says where the files went.
      assert.ok(exit.stdout.includes(text), 'the text summary is printed');
      assert.match(text, new RegExp(`^${journey} \\(smoke\\) run by Herald's k6-compatible runtime \\(loadtest/runtime, not k6\\), \\d+\\.\\d s$`, 'm'));
      assert.match(text, /^thresholds: all held$/m);
      assert.ok(exit.stderr.includes(`summary written to ${join(dir, files[0] as string)} and ${join(dir, files[1] as string)}`), exit.stderr);
    });
  }

  test('a crossed threshold exits 99 and names it; the summary is still written', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'herald-k6-crossed-'));
    // Nothing listens there: every request fails.
    const exit = await load(['identity', '--smoke', '--provision', provisionFile, '--summary-dir', dir], { HERALD_URL: `http://127.0.0.1:${await freePort()}` });
    assert.equal(exit.code, 99, exit.stderr);
    const { data } = await summaryIn(dir);
    const crossed = Object.entries(data.metrics).flatMap(([name, metric]) => Object.entries(metric.thresholds ?? {}).filter(([, result]) => !result.ok).map(([expression]) => `${name} ${expression}`));
    assert.deepEqual(crossed.sort(), ['checks rate==1', 'http_req_duration{name:identity,status:429} p(95)<10000', 'http_req_failed rate==0', 'identity_admitted count>0', 'identity_rate_limited count>0']);
    assert.match(exit.stderr, /thresholds crossed: /);
    // Every request is explained: status 0 (no connection) at the identity endpoint.
    const requests = data.metrics.http_reqs?.values.count ?? 0;
    assert.ok(requests > 100, String(requests));
    assert.equal(data.metrics['http_reqs{name:identity,status:0}']?.values.count, requests - 1);
  });

  test('what the runtime lacks fails loudly, naming the API: a shim, an option, an executor', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'herald-k6-lacking-'));
    try {
      const script = (options: string, body: string): string =>
        `import http from 'k6/http';\nexport const options = ${options};\nexport default function () {\n  ${body}\n}\n`;
      const scenario = "{ scenarios: { one: { executor: 'constant-vus', vus: 1, duration: '200ms' } } }";
      await writeFile(join(dir, 'batch.ts'), script(scenario, "http.batch([['GET', __ENV.HERALD_URL]]);"));
      await writeFile(join(dir, 'cookies.ts'), script(scenario, 'void http.get(`${__ENV.HERALD_URL}/api/v1/server/identity`).cookies;'));
      await writeFile(join(dir, 'stages.ts'), script("{ stages: [{ duration: '1s', target: 1 }] }", ''));
      await writeFile(join(dir, 'executor.ts'), script("{ scenarios: { one: { executor: 'per-vu-iterations', vus: 1, iterations: 1 } } }", ''));
      const run = (file: string) => load([join(dir, file), '--smoke', '--provision', provisionFile, '--summary-dir', dir]);
      const [batch, cookies, stages, executor] = await Promise.all(['batch.ts', 'cookies.ts', 'stages.ts', 'executor.ts'].map(run));
      const notImplemented = "is not implemented by Herald's k6-compatible runtime (loadtest/runtime, not k6)";
      assert.match(batch?.stderr ?? '', new RegExp(`iteration error: Error: k6/http\\.batch ${notImplemented.replace(/[()]/g, '\\$&')}`));
      assert.match(cookies?.stderr ?? '', new RegExp(`iteration error: Error: Response\\.cookies ${notImplemented.replace(/[()]/g, '\\$&')}`));
      assert.equal(stages?.code, 1);
      assert.match(stages?.stderr ?? '', new RegExp(`load run failed: Error: options\\.stages ${notImplemented.replace(/[()]/g, '\\$&')}`));
      assert.equal(executor?.code, 1);
      assert.match(executor?.stderr ?? '', /load run failed: Error: the per-vu-iterations executor \(scenario "one"\) is not implemented/);
    } finally {
      await exec('rm', ['-rf', dir]);
    }
  });

  test('the shims behave as k6: blocking and async requests, groups, sleep, timers, the four metrics, crypto, encoding, SharedArray, open(), __VU/__ITER and k6/execution', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'herald-k6-shims-'));
    await writeFile(join(dir, 'fixture.txt'), 'fixture\n');
    await writeFile(
      join(dir, 'shims.ts'),
      `import { check, group, sleep } from 'k6';
import crypto from 'k6/crypto';
import { SharedArray } from 'k6/data';
import encoding from 'k6/encoding';
import exec from 'k6/execution';
import http from 'k6/http';
import { Counter, Gauge, Rate, Trend } from 'k6/metrics';
import { setTimeout } from 'k6/timers';
import { IDENTITY } from './lib/paths.ts';

const items = new SharedArray('items', () => [{ n: 1 }, { n: 2 }]);
const fixture: string = open('./fixture.txt');
const counter = new Counter('shim_counter');
const gauge = new Gauge('shim_gauge');
const rate = new Rate('shim_rate');
const trend = new Trend('shim_trend', true);

export const options = {
  scenarios: { one: { executor: 'constant-vus', vus: 2, duration: '1s', exec: 'shims', tags: { suite: 'shims' } } },
  thresholds: {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    shim_counter: ['count>=2'],
    shim_gauge: ['value==7'],
    shim_rate: ['rate==1'],
    shim_trend: ['min>=50'],
    'http_req_duration{name:async,suite:shims}': ['count>=2'],
    'http_req_duration{name:sync,group:::inner}': ['count>=2'],
  },
};

export function setup(): { started: number } {
  return { started: 42 };
}

export async function shims(data: { started: number }): Promise<void> {
  counter.add(1);
  gauge.add(7);
  rate.add(true);
  const waited = await new Promise<string>((resolve) => setTimeout(() => resolve('timer'), 10));
  const before = Date.now();
  sleep(0.05);
  trend.add(Date.now() - before);
  const url = __ENV.HERALD_URL + IDENTITY;
  const pending = http.asyncRequest('GET', url, null, { tags: { name: 'async' }, responseCallback: http.expectedStatuses(401) });
  const sync = group('inner', () => http.get(url, { tags: { name: 'sync' }, responseCallback: http.expectedStatuses(401) }));
  const async = await pending;
  check(sync, {
    'setup data reaches the VU': () => data.started === 42,
    'hmac': () => crypto.hmac('sha256', 'key', 'The quick brown fox jumps over the lazy dog', 'hex') === 'f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8',
    'sha256': () => crypto.sha256('abc', 'base64rawurl') === 'ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0',
    'b64encode': () => encoding.b64encode('hi') === 'aGk=' && encoding.b64encode('hi', 'rawstd') === 'aGk' && encoding.b64encode('hello?', 'rawurl') === 'aGVsbG8_',
    'b64decode': () => encoding.b64decode('aGVsbG8_', 'rawurl', 's') === 'hello?',
    'SharedArray': () => items.length === 2 && Object.isFrozen(items) && items[1].n === 2,
    'open': () => fixture === 'fixture\\n',
    'timers': () => waited === 'timer',
    'VU ids': () => __VU === exec.vu.idInTest && __VU >= 1,
    'iterations': () => __ITER === exec.vu.iterationInScenario && exec.scenario.iterationInTest >= __ITER,
    'scenario': () => exec.scenario.name === 'one',
    'blocking and async responses': (r) => r.status === 401 && async.status === 401 && async.timings.duration > 0 && r.timings.duration > 0,
    'canonical headers': (r) => (r.headers['Content-Type'] ?? '').startsWith('application/json') && r.headers['X-Request-Id'] !== undefined,
    'json': (r) => r.json().code === 'unauthorized' && r.request.method === 'GET' && r.url === url,
  });
}
`,
    );
    await mkdir(join(dir, 'lib'));
    await writeFile(join(dir, 'lib', 'paths.ts'), "export const IDENTITY: string = '/api/v1/server/identity';\n");
    const exit = await load([join(dir, 'shims.ts'), '--provision', provisionFile, '--summary-dir', dir]);
    assert.equal(exit.code, 0, exit.stdout + exit.stderr);
    assert.match(exit.stdout, /^thresholds: all held$/m);
    const checks = [...exit.stdout.matchAll(/^ {2}([✓✗]) (\S[^(]*?) {2}\((\d+) passed, (\d+) failed\)$/gmu)].map(([, mark, name]) => `${mark} ${name}`);
    assert.deepEqual(checks, ['setup data reaches the VU', 'hmac', 'sha256', 'b64encode', 'b64decode', 'SharedArray', 'open', 'timers', 'VU ids', 'iterations', 'scenario', 'blocking and async responses', 'canonical headers', 'json'].map((name) => `✓ ${name}`));
    await exec('rm', ['-rf', dir]);
  });

  test('usage errors exit 2: no script, an unknown one, a target off this machine without --remote', async () => {
    const none = await load([]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /^name one journey or script\nusage: npm run load -- <journey \| path\/to\/script\.ts>/);
    const unknown = await load(['nosuch', '--smoke']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /^no journey or script "nosuch"\n/);
    const remote = await load(['identity', '--smoke', '--provision', provisionFile], { HERALD_URL: 'http://herald.example.test' });
    assert.equal(remote.code, 2);
    assert.match(remote.stderr, /^HERALD_URL http:\/\/herald\.example\.test is not on this machine: pass --remote to load it on purpose\n/);
  });
});
