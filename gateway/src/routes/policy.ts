import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Principal } from '@herald/proto/herald/account/v1/account';
import type { Changer, GetPolicyResponse, ParameterValue, PolicyVersion } from '@herald/proto/herald/policy/v1/policy';
import { Type, type Static } from '@sinclair/typebox';

import { endUserOf, principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { Nullable, orNull, PageOf, PageQuery, Parameters, withErrors } from '../schemas/common.js';

/**
 * POST /authorize (evaluate a tool call against the workspace policy), the policy itself, its
 * past versions, and POST /policy/evaluate (try a call against a draft or the saved policy).
 */

const MAX_POLICY_BYTES = 65_536;

const ToolCallFields = {
  toolName: Type.String({ minLength: 1, maxLength: 200, description: 'The tool the agent wants to call (the Cedar resource Herald::Tool)' }),
  toolTarget: Type.Optional(Type.String({ minLength: 1, maxLength: 1_000, description: 'What the tool acts on (resource.target)' })),
  actor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The agent acting (principal.actor)' })),
  environment: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'e.g. production (context.environment)' })),
  parameters: Type.Optional(Parameters),
  externalId: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'The end-user the call is for; a bound key may name only its own' })),
};

const AuthorizeBody = Type.Object(ToolCallFields, { additionalProperties: false });

const Outcome = {
  verdict: Type.Union([Type.Literal('allow'), Type.Literal('deny'), Type.Literal('requires_human')]),
  policy: Nullable(Type.String({ description: 'Id of the deciding Cedar policy' })),
  reason: Type.String(),
};

const Verdict = Type.Object({ ...Outcome, authorizationId: Type.String() });

const EvaluateBody = Type.Object(
  { ...ToolCallFields, policy: Type.Optional(Type.String({ maxLength: MAX_POLICY_BYTES, description: 'A draft to evaluate instead of the saved policy (validated, not stored)' })) },
  { additionalProperties: false },
);

const Evaluation = Type.Object({
  ...Outcome,
  version: Nullable(Type.Integer({ description: 'The saved version evaluated (0: none ever written); null for a draft' })),
});

const ChangedBy = Nullable(
  Type.Object(
    { kind: Type.Union([Type.Literal('key'), Type.Literal('member')]), id: Type.String({ description: 'The API key id or the member id' }) },
    { description: 'Who wrote this version; null when not recorded' },
  ),
);

const VersionFields = {
  version: Type.Integer({ minimum: 1 }),
  deleted: Type.Boolean({ description: 'True for a DELETE /policy (the workspace had no policy from then on)' }),
  changedBy: ChangedBy,
  createdAt: Type.String(),
};

const PolicyVersionSummary = Type.Object(VersionFields);
const PolicyVersionDocument = Type.Object({ ...VersionFields, policy: Nullable(Type.String({ description: 'The Cedar text of this version; null when deleted' })) });

const VersionParams = Type.Object({ version: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }) });

const PolicyDocument = Type.Object({
  policy: Nullable(Type.String({ description: 'Cedar policy text; null when the workspace has none (everything is denied)' })),
  version: Type.Integer({ description: 'Bumped on every write; 0 when none was ever written' }),
  updatedAt: Nullable(Type.String()),
});

const PutPolicyBody = Type.Object({ policy: Type.String({ maxLength: MAX_POLICY_BYTES }) }, { additionalProperties: false });

function policyDocument(view: GetPolicyResponse | undefined) {
  if (!view) throw new Error('policy service returned no policy');
  return { policy: view.present ? view.policy : null, version: Number(view.version), updatedAt: orNull(view.updatedAt) };
}

/** Who makes a change: the signed-in member, else the key. */
function changerOf(principal: Principal): Changer {
  return principal.memberId ? { kind: 'member', id: principal.memberId } : { kind: 'key', id: principal.keyId };
}

function versionSummary(version: PolicyVersion) {
  const changedBy = version.changedBy ? { kind: version.changedBy.kind as 'key' | 'member', id: version.changedBy.id } : null;
  return { version: Number(version.version), deleted: !version.present, changedBy, createdAt: version.createdAt };
}

/** The sample call's fields as the policy service takes them (POST /authorize and /policy/evaluate). */
function toolCallOf(principal: Principal, body: Static<typeof AuthorizeBody>, action: string) {
  return {
    workspaceId: principal.workspaceId,
    keyId: principal.keyId,
    keyOrigin: principal.keyOrigin,
    externalId: endUserOf(principal, body.externalId, action) ?? '',
    toolName: body.toolName,
    toolTarget: body.toolTarget ?? '',
    actor: body.actor ?? '',
    environment: body.environment ?? '',
    parameters: Object.fromEntries(Object.entries(body.parameters ?? {}).map(([name, value]) => [name, parameterValue(value)])),
  };
}

function parameterValue(value: string | number | boolean | null): ParameterValue {
  if (value === null) return {};
  if (typeof value === 'string') return { kind: { $case: 'stringValue', value } };
  if (typeof value === 'number') return { kind: { $case: 'numberValue', value } };
  return { kind: { $case: 'boolValue', value } };
}

export const policyRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.post(
      '/authorize',
      {
        config: { access: { scope: 'authorize' } },
        schema: { tags: ['Policy'], operationId: 'authorize', summary: 'Evaluate a tool call against the workspace policy', body: AuthorizeBody, response: withErrors({ 200: Verdict }) },
      },
      async (request) => {
        const result = await clients.policy.authorize(toolCallOf(principalOf(request), request.body, 'evaluate policy'));
        return {
          verdict: result.verdict as 'allow' | 'deny' | 'requires_human',
          policy: orNull(result.policyId),
          reason: result.reason,
          authorizationId: result.authorizationId,
        };
      },
    );

    app.get(
      '/policy',
      { config: { access: { scope: 'policy' } }, schema: { tags: ['Policy'], operationId: 'getPolicy', summary: "Read the workspace's Cedar policy", response: withErrors({ 200: PolicyDocument }) } },
      async (request) => policyDocument(await clients.policy.getPolicy({ workspaceId: principalOf(request).workspaceId })),
    );

    app.put(
      '/policy',
      { config: { access: { scope: 'policy' } }, schema: { tags: ['Policy'], operationId: 'putPolicy', summary: "Replace the workspace's Cedar policy (validated first)", body: PutPolicyBody, response: withErrors({ 200: PolicyDocument }) } },
      async (request) => {
        const principal = principalOf(request);
        const { policy } = await clients.policy.putPolicy({ workspaceId: principal.workspaceId, policy: request.body.policy, changedBy: changerOf(principal) });
        return policyDocument(policy);
      },
    );

    app.delete(
      '/policy',
      { config: { access: { scope: 'policy' } }, schema: { tags: ['Policy'], operationId: 'deletePolicy', summary: "Delete the workspace's policy (everything is denied)", response: withErrors({ 200: PolicyDocument }) } },
      async (request) => {
        const principal = principalOf(request);
        const { policy } = await clients.policy.deletePolicy({ workspaceId: principal.workspaceId, changedBy: changerOf(principal) });
        return policyDocument(policy);
      },
    );

    app.get(
      '/policy/versions',
      {
        config: { access: { scope: 'policy' } },
        schema: {
          tags: ['Policy'],
          operationId: 'listPolicyVersions',
          summary: "List the policy's versions, newest first (the newest is in force)",
          querystring: Type.Object(PageQuery, { additionalProperties: false }),
          response: withErrors({ 200: PageOf(PolicyVersionSummary) }),
        },
      },
      async (request) => {
        const { versions, nextCursor } = await clients.policy.listPolicyVersions({
          workspaceId: principalOf(request).workspaceId,
          limit: request.query.limit,
          cursor: request.query.cursor ?? '',
        });
        return { data: versions.map(versionSummary), hasMore: nextCursor !== '', nextCursor: orNull(nextCursor) };
      },
    );

    app.get(
      '/policy/versions/:version',
      {
        config: { access: { scope: 'policy' } },
        schema: { tags: ['Policy'], operationId: 'getPolicyVersion', summary: 'Read one version of the policy, with its text', params: VersionParams, response: withErrors({ 200: PolicyVersionDocument }) },
      },
      async (request) => {
        const { version } = await clients.policy.getPolicyVersion({ workspaceId: principalOf(request).workspaceId, version: String(request.params.version) });
        if (!version) throw new Error('policy service returned no version');
        return { ...versionSummary(version), policy: version.present ? version.policy : null };
      },
    );

    app.post(
      '/policy/evaluate',
      {
        config: { access: { scope: 'policy' } },
        schema: {
          tags: ['Policy'],
          operationId: 'evaluatePolicy',
          summary: 'Try a tool call against a draft or the saved policy (nothing is recorded)',
          body: EvaluateBody,
          response: withErrors({ 200: Evaluation }),
        },
      },
      async (request) => {
        const principal = principalOf(request);
        const draft = request.body.policy;
        const result = await clients.policy.evaluatePolicy({ call: toolCallOf(principal, request.body, 'evaluate policy'), ...(draft === undefined ? {} : { draft }) });
        return {
          verdict: result.verdict as 'allow' | 'deny' | 'requires_human',
          policy: orNull(result.policyId),
          reason: result.reason,
          version: draft === undefined ? Number(result.version) : null,
        };
      },
    );
  };
