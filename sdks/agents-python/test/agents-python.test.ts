import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { answerChannel } from '@herald/bus';
import { connectDatabase, createKey, freePort, passes, repoRoot, requiredEnv, seedAudience, startSendingHarness, type SendingHarness } from '@herald/testkit';
import { Redis } from 'ioredis';

// The Python agent adapters (sdks/agents-python) against the running system: this file
// starts a stack, gives each framework's suite a workspace of its own, and runs it in that
// framework's venv (scripts/ensure-venv.sh), where a scripted model drives the framework's real
// agent loop; then mypy --strict over the adapter in the same venv.

const PACKAGE = join(repoRoot, 'sdks/agents-python');
/** CrewAI writes to the home folder and reports telemetry unless told otherwise. */
async function crewaiEnv(): Promise<Record<string, string>> {
  const home = await mkdtemp(join(tmpdir(), 'herald-crewai-'));
  return { HOME: home, CREWAI_STORAGE_DIR: join(home, 'storage'), CREWAI_DISABLE_TELEMETRY: 'true', CREWAI_TRACING_ENABLED: 'false', OTEL_SDK_DISABLED: 'true' };
}

/** Each framework's test modules (in tests/), the modules mypy checks besides the shared ones, and the suite's own environment. */
const SUITES = {
  langgraph: { tests: ['test_gate', 'test_tools', 'test_langgraph'], more: ['langgraph_agent'], env: async () => ({}) },
  openai_agents: { tests: ['test_openai_agents'], more: [], env: async () => ({}) },
  crewai: { tests: ['test_crewai'], more: [], env: crewaiEnv },
} satisfies Record<string, { tests: string[]; more: string[]; env(): Promise<Record<string, string>> }>;
type Framework = keyof typeof SUITES;
/** Where the tests import from: the SDK, the adapters, their own support and the SDK's test support. */
const PYTHON_PATH = [join(repoRoot, 'sdks/sdk-python/src'), join(PACKAGE, 'src'), join(PACKAGE, 'tests'), join(repoRoot, 'sdks/sdk-python/tests')].join(':');

let harness: SendingHarness;
let brokenGateway: string;
let control: Server;
let redis: Redis;

/**
 * What the Python tests cannot do through the API: make a decision expire now (its lifetime is at
 * least 60 s). POST /expire/<decisionId> moves its expiry into the past and wakes the gateways'
 * waiters, as the answer of any other state change would.
 */
function startControl(): Promise<Server> {
  const server = createServer((request, response) => {
    const match = /^\/expire\/(dec_[A-Za-z0-9_-]+)$/.exec(request.url ?? '');
    if (request.method !== 'POST' || !match?.[1]) {
      response.writeHead(404).end();
      return;
    }
    const decisionId = match[1];
    void (async () => {
      const db = await connectDatabase();
      try {
        const moved = await db.query(`UPDATE decision.questions SET expires_at = now() - interval '1 second', created_at = now() - interval '2 seconds' WHERE id = $1`, [decisionId]);
        await redis.publish(answerChannel(harness.stack.topicPrefix, decisionId), 'expired');
        response.writeHead(moved.rowCount === 1 ? 204 : 404).end();
      } finally {
        await db.end();
      }
    })().catch((err: unknown) => response.writeHead(500).end(String(err)));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

before(async () => {
  harness = await startSendingHarness({ policy: true, decisions: true, env: { ASK_LIFETIME_SECONDS: '8' } });
  // A gateway whose policy service cannot be reached: its /authorize answers 503.
  brokenGateway = await harness.stack.addGateway({ POLICY_GRPC_URL: `127.0.0.1:${await freePort()}` });
  redis = new Redis(requiredEnv('REDIS_URL'));
  control = await startControl();
});
after(async () => {
  control?.close();
  redis?.disconnect();
  await harness?.stop();
});

/** The framework's venv, made or checked by the package's script (which prints its python). */
async function venvPython(framework: Framework): Promise<string> {
  return (await passes('bash', [join(PACKAGE, 'scripts/ensure-venv.sh'), framework], {}, 900_000)).stdout.trim();
}

for (const [framework, suite] of Object.entries(SUITES) as Array<[Framework, (typeof SUITES)[Framework]]>) {
  test(`the ${framework} adapter passes its unittest suite against the running system, then mypy --strict`, async () => {
    const python = await venvPython(framework);
    // A workspace per suite: each puts its own policy. One subscriber, so a notification is sent to someone.
    const audience = await seedAudience(harness, 1);
    // Another key of the workspace: the approver the suites name ({"kind": "key", "id": its key id}).
    const reviewer = await createKey(audience.workspace.workspaceId, 'runtime', '--name', 'reviewer');
    const { output } = await passes(python, ['-m', 'unittest', '-v', ...suite.tests], {
      PYTHONPATH: PYTHON_PATH,
      // No __pycache__ folders in the tree.
      PYTHONDONTWRITEBYTECODE: '1',
      HERALD_URL: harness.stack.gatewayUrl,
      HERALD_BROKEN_URL: brokenGateway,
      HERALD_API_KEY: audience.workspace.apiKey,
      HERALD_REVIEWER_KEY_ID: reviewer.keyId,
      HERALD_REVIEWER_API_KEY: reviewer.apiKey,
      HERALD_CONTROL_URL: `http://127.0.0.1:${(control.address() as AddressInfo).port}`,
      ...(await suite.env()),
    });
    assert.match(output, /^OK$/m, output);

    const checked = await passes(python, [
      '-m',
      'mypy',
      '--strict',
      '--config-file',
      join(PACKAGE, 'pyproject.toml'),
      '--cache-dir',
      join(repoRoot, `.local/mypy-cache-agents-${framework}`),
      ...['herald_agents', 'herald_agents.gate', 'herald_agents.tools', `herald_agents.${framework}`, ...suite.tests, ...suite.more].flatMap((module) => ['-m', module]),
    ], { MYPYPATH: PYTHON_PATH });
    assert.match(checked.output, /^Success: no issues found in \d+ source files/m, checked.output);
  });
}
