import assert from 'node:assert/strict';
import { test } from 'node:test';

import { compile, evaluate, preparse, type ToolCall } from '../src/cedar.js';

// The evaluator on its own: precedence between forbid, plain permit and @requires_human permit.

function load(setId: string, text: string) {
  const result = compile(text);
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  preparse(setId, result.compiled);
  return (call: Partial<ToolCall>) => evaluate(setId, result.compiled, { keyId: 'k', keyOrigin: 'dashboard', toolName: 'deploy', parameters: {}, ...call });
}

test('a plain permit beats a human-review permit; a forbid beats both', () => {
  const decide = load(
    'precedence',
    `@id("review") @requires_human permit(principal, action, resource);
     @id("staging") permit(principal, action, resource) when { context.environment == "staging" };
     @id("never-prod-db") forbid(principal, action, resource) when { resource has target && resource.target == "prod-db" };`,
  );
  assert.deepEqual(decide({ environment: 'staging' }), { verdict: 'allow', policyId: 'staging', reason: 'permitted by policy staging' });
  assert.deepEqual(decide({ environment: 'production' }), {
    verdict: 'requires_human',
    policyId: 'review',
    reason: 'policy review permits this call only after a person approves it',
  });
  assert.deepEqual(decide({ environment: 'staging', toolTarget: 'prod-db' }), { verdict: 'deny', policyId: 'never-prod-db', reason: 'forbidden by policy never-prod-db' });
});

test('an arithmetic overflow in a forbid denies even though a permit matches', () => {
  const decide = load(
    'overflow',
    `@id("all") permit(principal, action, resource);
     @id("big") forbid(principal, action, resource) when { resource.hasTag("n") && resource.getTag("n").long * 9223372036854775807 < 0 };`,
  );
  assert.deepEqual(decide({ parameters: { n: 0 } }), { verdict: 'allow', policyId: 'all', reason: 'permitted by policy all' });
  const overflow = decide({ parameters: { n: 2 } });
  assert.deepEqual({ verdict: overflow.verdict, policyId: overflow.policyId }, { verdict: 'deny', policyId: 'big' });
  assert.match(overflow.reason, /^evaluation error in forbid policy big: .*overflow/);
});

test('a policy set is refused whole: @requires_human on a forbid, templates, a bad schema reference', () => {
  const problems = (text: string) => {
    const result = compile(text);
    assert.equal(result.ok, false, text);
    return result.ok ? [] : result.problems.map((problem) => problem.message);
  };
  assert.deepEqual(problems('@requires_human forbid(principal, action, resource);'), ['@requires_human applies to permit policies only']);
  assert.deepEqual(problems('permit(principal == ?principal, action, resource);'), ['policy templates (?principal, ?resource slots) are not supported']);
  assert.match(problems('permit(principal, action == Herald::Action::"delete", resource);')[0] ?? '', /Herald::Action::"delete"/);
});
