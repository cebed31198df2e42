import assert from 'node:assert/strict';

import { Herald, type AskRecord, type Decision } from '@herald/sdk';
import { call, createKey, createWorkspace, seedAudience, startSendingHarness, type SendingHarness, type TestWorkspace } from '@herald/testkit';

/** What the adapter tests share: a running Herald, a workspace with a policy, and a person who answers. */

/** read_file is allowed, deploy needs a person, anything else is denied (no policy permits it). */
export const POLICY = `
@id("read-anything")
permit(principal, action, resource) when { resource.name == "read_file" };

@id("deploy-reviewed")
@requires_human
permit(principal, action, resource) when { resource.name == "deploy" };
`;

/** Herald with sending, policy and decisions: what the tools and the gate call. */
export function startAgentsHarness(): Promise<SendingHarness> {
  return startSendingHarness({ policy: true, decisions: true });
}

export interface PolicyWorkspace {
  workspace: TestWorkspace;
  herald: Herald;
}

/** A workspace of its own with POLICY, and one approver device (the owner's, proven) so notifications and questions reach someone. */
export async function policyWorkspace(harness: SendingHarness): Promise<PolicyWorkspace> {
  const { workspace } = await seedAudience(harness, 1, 'growth', () => ({ externalId: 'owner', tags: [], verified: true }));
  const herald = new Herald({ apiKey: workspace.apiKey, baseUrl: harness.stack.gatewayUrl });
  await herald.putPolicy(POLICY);
  return { workspace, herald };
}

/** A workspace without a subscriber or policy (everything is denied). */
export async function bareWorkspace(harness: SendingHarness): Promise<Herald> {
  const workspace = await createWorkspace('growth');
  return new Herald({ apiKey: workspace.apiKey, baseUrl: harness.stack.gatewayUrl });
}

/** The reviewer: another API key of the workspace (answering with POST /decisions/{id}), to be named as a question's approver `{kind: "key", id: keyId}`. */
export async function reviewerOf(harness: SendingHarness, workspace: TestWorkspace): Promise<{ keyId: string; herald: Herald }> {
  const { keyId, apiKey } = await createKey(workspace.workspaceId, 'runtime', '--name', 'reviewer');
  return { keyId, herald: new Herald({ apiKey, baseUrl: harness.stack.gatewayUrl }) };
}

/** The person answers on the answer page's JSON endpoint, as a notification action does. */
export async function personAnswers(harness: SendingHarness, question: Decision | AskRecord, answer: string): Promise<void> {
  const response = await answerByLink(harness, question, answer);
  assert.equal(response.status, 200, JSON.stringify(response.body));
}

/** The holder of the link the caller got answers; the status (403 in the error shape where the question names its approvers). */
export async function linkAnswerStatus(harness: SendingHarness, question: Decision | AskRecord, answer: string): Promise<number> {
  const response = await answerByLink(harness, question, answer);
  if (response.status === 403) assert.equal((response.body as { code?: string }).code, 'forbidden');
  return response.status;
}

function answerByLink(harness: SendingHarness, question: Decision | AskRecord, answer: string) {
  const page = 'decisionPageUrl' in question ? question.decisionPageUrl : question.liveUrl;
  const token = new URL(page).pathname.slice('/a/'.length);
  return call(harness.stack.gatewayUrl, `/api/v1/answer/${token}`, { method: 'POST', body: { answer } });
}
