import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { admin, call, chromiumPath, SAMPLE_POLICY, SERVER_API } from '@herald/testkit';
import { chromium, type Browser, type Page } from 'playwright-core';

import { csrfOf, fetchFromPage, forbiddenForRole, memberPage, newAddress, ownerPage, screenshotPath, seriousViolations, startConsoleHarness, type ConsoleHarness } from './support.js';

// The policy page in Debian's Chromium on a real stack with the policy service: a bad draft's
// problem shown at its line and column (the caret moved there), a good one saved, "Try it" giving
// each verdict the policy says, the previous version listed and restored into the editor; a viewer
// reads it all and the API refuses their changes (403).

let harness: ConsoleHarness;
let browser: Browser;
before(async () => {
  harness = await startConsoleHarness({ services: ['policy'] });
  browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox'] });
});
after(async () => {
  await browser?.close();
  await harness?.stop();
});

const FIRST = '@id("everything")\npermit(principal, action, resource);';

/** The same policy with a mistake on line 3: an attribute Herald's schema does not have. */
const BAD = SAMPLE_POLICY.replace('when { resource.name == "read_file" };', 'when { resource.owner == "me" };');

/** The editor's caret as (line, column), from its selection. */
const caretOf = (page: Page) =>
  page.getByLabel('Cedar policy').evaluate((element) => {
    const textarea = element as HTMLTextAreaElement;
    const before = textarea.value.slice(0, textarea.selectionStart).split('\n');
    return { line: before.length, column: (before.at(-1)?.length ?? 0) + 1, focused: document.activeElement === textarea };
  });

/** Replaces the editor's text. */
const typeInEditor = (page: Page, text: string) => page.getByLabel('Cedar policy').fill(text);

test('edit the policy: a bad draft shows its problem at its line and column, a good one saves, try-it gives allow, deny and requires_human, and the previous version is listed and restored; by keyboard, no serious axe violation', async () => {
  // A first version, written with the workspace's key.
  const put = await call(harness.origin, `${SERVER_API}/policy`, { method: 'PUT', key: harness.workspace.apiKey, body: { policy: FIRST } });
  assert.equal(put.status, 200);
  const { context, page } = await ownerPage(browser, harness);
  await page.getByRole('link', { name: 'Policy' }).click();
  await page.getByRole('heading', { name: 'Policy', level: 1 }).waitFor();
  await page.getByText('Version 1 is in force.').waitFor();
  assert.equal(await page.getByLabel('Cedar policy').inputValue(), FIRST);

  // A bad draft: Validate names the problem at line 3, column 8; a click on it puts the caret there.
  await typeInEditor(page, BAD);
  assert.equal(await page.locator('.gutter').textContent(), Array.from({ length: BAD.split('\n').length }, (_, index) => `${index + 1}\n`).join(''));
  await page.getByRole('button', { name: 'Validate' }).click();
  const problems = page.getByRole('list', { name: 'Problems' });
  await problems.waitFor();
  assert.deepEqual(await problems.getByRole('listitem').allTextContents(), [
    'Line 3, column 8 attribute `owner` on entity type `Herald::Tool` not found (policy read-anything) did you mean `name`?',
  ]);
  assert.deepEqual(await page.locator('.gutter .bad').allTextContents(), ['3\n']);
  // By keyboard: Tab from Save reaches the problem's button; Enter puts the caret at the problem.
  await page.getByRole('button', { name: 'Save' }).focus();
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Line 3, column 8');
  await page.keyboard.press('Enter');
  assert.deepEqual(await caretOf(page), { line: 3, column: 8, focused: true });
  assert.equal(await page.locator('#policy-caret').textContent(), 'Line 3, column 8');
  await page.getByText('The draft has a problem.').waitFor();
  assert.deepEqual(await seriousViolations(page), []);
  // Save refuses it too; nothing changes.
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('The draft has a problem; nothing was saved.').waitFor();
  assert.equal((await call<{ version: number }>(harness.origin, `${SERVER_API}/policy`, { key: harness.workspace.apiKey })).body.version, 1);

  // The good one: valid, then saved as version 2.
  await typeInEditor(page, SAMPLE_POLICY);
  await page.getByRole('button', { name: 'Validate' }).click();
  await page.getByText('The draft is valid.').waitFor();
  await page.getByRole('button', { name: 'Save' }).focus();
  await page.keyboard.press('Enter');
  await page.getByText('Saved: version 2 is in force.').waitFor();
  const saved = await call<{ policy: string; version: number }>(harness.origin, `${SERVER_API}/policy`, { key: harness.workspace.apiKey });
  assert.deepEqual([saved.body.policy, saved.body.version], [SAMPLE_POLICY, 2]);

  // Try it, against the saved policy and against a draft.
  const tryIt = page.getByRole('form', { name: 'Try it' });
  const evaluate = async (fields: Record<string, string>, expected: string) => {
    for (const label of ['Tool name', 'Tool target', 'Actor', 'Environment', 'External id', 'Parameters']) await tryIt.getByLabel(label, { exact: true }).fill(fields[label] ?? '');
    await tryIt.getByRole('button', { name: 'Evaluate' }).click();
    await tryIt.locator('.verdict', { hasText: expected }).waitFor();
    assert.equal(await tryIt.locator('.verdict').textContent(), expected);
  };
  await tryIt.getByLabel('The saved policy').check();
  await evaluate({ 'Tool name': 'read_file', 'Tool target': 'notes.txt' }, 'Verdict: allow (policy read-anything): permitted by policy read-anything (saved version 2)');
  await evaluate({ 'Tool name': 'read_file', 'Tool target': 'prod.env' }, 'Verdict: deny (policy no-secrets): forbidden by policy no-secrets (saved version 2)');
  await evaluate(
    { 'Tool name': 'deploy', Environment: 'production', Actor: 'ci-bot', Parameters: '{"ref": "main"}' },
    'Verdict: requires_human (policy deploy-reviewed): policy deploy-reviewed permits this call only after a person approves it (saved version 2)',
  );
  await evaluate({ 'Tool name': 'deploy', Environment: 'staging' }, 'Verdict: deny: no policy permits this call (saved version 2)');
  // A draft in the editor that permits staging too, tried before it is saved.
  await typeInEditor(page, `${SAMPLE_POLICY}\n\n@id("staging")\npermit(principal, action, resource) when { context.environment == "staging" };`);
  await tryIt.getByLabel('The draft in the editor').check();
  await evaluate({ 'Tool name': 'deploy', Environment: 'staging' }, 'Verdict: allow (policy staging): permitted by policy staging (the draft)');
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('console-policy.png'), fullPage: true });
  // Parameters that are not a JSON object are refused before any call.
  await tryIt.getByLabel('Parameters').fill('[1]');
  await tryIt.getByRole('button', { name: 'Evaluate' }).click();
  await tryIt.getByText('Parameters must be a JSON object, e.g. {"amount": 40}.').waitFor();

  // Past versions, newest first; version 1 viewed and restored into the editor.
  const versions = page.getByRole('table', { name: 'Versions of the policy, newest first' });
  const rows = versions.getByRole('row');
  await rows.nth(2).waitFor();
  assert.deepEqual(await versions.getByRole('rowheader').allTextContents(), ['2 (in force)', '1']);
  // Who wrote each: the owner's name (the members list), the key's id.
  await versions.getByText('Olive Owner (member)').waitFor();
  const by = await Promise.all([1, 2].map((index) => rows.nth(index).getByRole('cell').nth(1).textContent()));
  assert.deepEqual(by, ['Olive Owner (member)', `API key ${harness.workspace.keyId}`]);
  await page.getByRole('button', { name: 'View version 1' }).focus();
  await page.keyboard.press('Enter');
  const dialog = page.getByRole('dialog', { name: 'Version 1' });
  await dialog.getByLabel('The text of version 1').waitFor();
  assert.equal(await dialog.getByLabel('The text of version 1').textContent(), FIRST);
  assert.deepEqual(await seriousViolations(page), []);
  await dialog.getByRole('button', { name: 'Restore into the editor' }).click();
  await page.getByText('Version 1 is in the editor; Save puts it in force again.').waitFor();
  assert.equal(await page.getByLabel('Cedar policy').inputValue(), FIRST);
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('Saved: version 3 is in force.').waitFor();
  await versions.getByRole('rowheader', { name: '3 (in force)' }).waitFor();
  const restored = await call<{ policy: string; version: number }>(harness.origin, `${SERVER_API}/policy`, { key: harness.workspace.apiKey });
  assert.deepEqual([restored.body.policy, restored.body.version], [FIRST, 3]);
  await context.close();
});

test('a viewer reads the policy and its versions, read only, with no Save or Try it; the API refuses their save and try-it with 403', async () => {
  const email = newAddress('viewer');
  await admin('member', 'invite', '--workspace', harness.workspace.workspaceId, '--email', email, '--role', 'viewer', '--name', 'Vera Viewer');
  const { context, page } = await memberPage(browser, harness, email);
  await page.getByRole('link', { name: 'Policy' }).click();
  await page.getByRole('heading', { name: 'Policy', level: 1 }).waitFor();
  await page.getByRole('table', { name: 'Versions of the policy, newest first' }).waitFor();
  const current = await call<{ policy: string | null; version: number }>(harness.origin, `${SERVER_API}/policy`, { key: harness.workspace.apiKey });
  assert.equal(await page.getByLabel('Cedar policy').inputValue(), current.body.policy ?? '');
  assert.equal(await page.getByLabel('Cedar policy').getAttribute('readonly'), '');
  await page.getByText('(read only: your role cannot change the policy)', { exact: false }).waitFor();
  for (const name of ['Save', 'Validate', 'Evaluate']) assert.equal(await page.getByRole('button', { name }).count(), 0, name);
  assert.equal(await page.getByRole('form', { name: 'Try it' }).count(), 0);
  assert.deepEqual(await seriousViolations(page), []);

  const csrf = await csrfOf(page);
  const refused = forbiddenForRole(harness, 'viewer', 'change', 'policy');
  assert.deepEqual(await fetchFromPage(page, 'PUT', '/policy', { policy: 'permit(principal, action, resource);' }, csrf), { status: 403, body: refused });
  assert.deepEqual(await fetchFromPage(page, 'POST', '/policy/evaluate', { toolName: 'read_file' }, csrf), { status: 403, body: refused });
  const after = await call<{ policy: string | null; version: number }>(harness.origin, `${SERVER_API}/policy`, { key: harness.workspace.apiKey });
  assert.deepEqual(after.body, current.body);
  await context.close();
});
