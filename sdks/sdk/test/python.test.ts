import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { createKey, createWorkspace, freePort, passes, repoRoot, seedAudience, startSendingHarness, type SendingHarness } from '@herald/testkit';
import { Webhook } from 'standardwebhooks';

// The Python SDK (sdks/sdk-python) against the running system: this file starts the stack,
// makes the workspaces and keys, and runs the package's unittest suite with them in the
// environment; then mypy --strict over the package, in the repository's tool venv.

const PYTHON_PACKAGE = join(repoRoot, 'sdks/sdk-python');

let harness: SendingHarness;
before(async () => {
  harness = await startSendingHarness({ policy: true, decisions: true, services: ['flow'], env: { ASK_LIFETIME_SECONDS: '8' } });
});
// A stack that never started (before failed) has nothing to stop.
after(() => harness?.stop());

/** Signed by the reference Standard Webhooks library, for the Python verify_webhook to check. */
function webhookFixture() {
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const previousSecret = `whsec_${randomBytes(32).toString('base64')}`;
  const body = JSON.stringify({ type: 'ask.answered', timestamp: new Date().toISOString(), data: { correlationId: 'ask_1', answered: true, value: 'yes' } });
  const id = 'msg_0123456789abcdefghijklmn';
  const at = new Date();
  const headers = {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1_000)),
    'webhook-signature': `${new Webhook(secret).sign(id, at, body)} ${new Webhook(previousSecret).sign(id, at, body)}`,
  };
  return { secret, previousSecret, body, headers };
}

test('the Python SDK passes its unittest suite against the running system', async () => {
  // Two approver devices (proven external ids user-0 and user-1), as decisions addressed to them need.
  const audience = await seedAudience(harness, 2, 'growth', (index) => ({ externalId: `user-${index}`, tags: [], verified: true }));
  const runtime = await createKey(audience.workspace.workspaceId, 'runtime');
  // Identity verification gets a workspace of its own, so its subscriber changes no other count.
  const identity = await seedAudience(harness, 0);
  const browser = harness.peer.createSubscription({ applicationServerKey: identity.vapidPublicKey });
  const [asks, pending, partner, free, limited] = await Promise.all([
    createWorkspace('growth'),
    createWorkspace('growth'),
    createWorkspace('partner'),
    createWorkspace('free'),
    createWorkspace('free'),
  ]);
  // A gateway whose policy service cannot be reached: its /authorize answers 503.
  const brokenGateway = await harness.stack.addGateway({ POLICY_GRPC_URL: `127.0.0.1:${await freePort()}` });
  const { output } = await passes('python3', ['-m', 'unittest', 'discover', '-s', 'sdks/sdk-python/tests', '-v'], {
    PYTHONPATH: join(PYTHON_PACKAGE, 'src'),
    // No __pycache__ folders in the tree.
    PYTHONDONTWRITEBYTECODE: '1',
    HERALD_URL: harness.stack.gatewayUrl,
    HERALD_BROKEN_URL: brokenGateway,
    HERALD_API_KEY: audience.workspace.apiKey,
    HERALD_SITE_ID: audience.workspace.siteId,
    HERALD_SUBSCRIBER_IDS: audience.subscribers.map((subscriber) => subscriber.id).join(','),
    HERALD_RUNTIME_KEY: runtime.apiKey,
    HERALD_ASK_KEY: asks.apiKey,
    HERALD_PENDING_KEY: pending.apiKey,
    HERALD_PARTNER_KEY: partner.apiKey,
    HERALD_FREE_KEY: free.apiKey,
    // Used up by the rate-limit test.
    HERALD_LIMITED_KEY: limited.apiKey,
    HERALD_ASK_LIFETIME_SECONDS: '8',
    HERALD_WEBHOOK_FIXTURE: JSON.stringify(webhookFixture()),
    HERALD_IDENTITY_KEY: identity.workspace.apiKey,
    HERALD_IDENTITY_SITE_KEY: identity.workspace.siteKey,
    HERALD_PUSH_SUBSCRIPTION: JSON.stringify({ endpoint: browser.endpoint, keys: browser.keys }),
  });
  assert.match(output, /^OK$/m, output);
});

test('the Python SDK type-checks with mypy --strict', async () => {
  // The script prints the venv's python on stdout (and what it installs on stderr).
  const python = (await passes('bash', [join(PYTHON_PACKAGE, 'scripts/ensure-mypy.sh')])).stdout.trim();
  const { output } = await passes(python, [
    '-m',
    'mypy',
    '--strict',
    '--config-file',
    join(PYTHON_PACKAGE, 'pyproject.toml'),
    '--cache-dir',
    join(repoRoot, '.local/mypy-cache'),
    join(PYTHON_PACKAGE, 'src'),
    join(PYTHON_PACKAGE, 'tests'),
  ]);
  assert.match(output, /^Success: no issues found in \d+ source files/m, output);
});
