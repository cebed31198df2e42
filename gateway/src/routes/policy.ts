import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { GetPolicyResponse, ParameterValue } from '@herald/proto/herald/policy/v1/policy';
import { Type } from '@sinclair/typebox';

import { endUserOf, principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { Nullable, orNull, Parameters, withErrors } from '../schemas/common.js';

/** POST /authorize (evaluate a tool call against the workspace policy) and the policy itself. */

const MAX_POLICY_BYTES = 65_536;

const AuthorizeBody = Type.Object(
  {
    toolName: Type.String({ minLength: 1, maxLength: 200, description: 'The tool the agent wants to call (the Cedar resource Herald::Tool)' }),
    toolTarget: Type.Optional(Type.String({ minLength: 1, maxLength: 1_000, description: 'What the tool acts on (resource.target)' })),
    actor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The agent acting (principal.actor)' })),
    environment: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'e.g. production (context.environment)' })),
    parameters: Type.Optional(Parameters),
    externalId: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'The end-user the call is for; a bound key may name only its own' })),
  },
  { additionalProperties: false },
);

const Verdict = Type.Object({
  verdict: Type.Union([Type.Literal('allow'), Type.Literal('deny'), Type.Literal('requires_human')]),
  policy: Nullable(Type.String({ description: 'Id of the deciding Cedar policy' })),
  reason: Type.String(),
  authorizationId: Type.String(),
});

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
        const principal = principalOf(request);
        const body = request.body;
        const externalId = endUserOf(principal, body.externalId, 'evaluate policy') ?? '';
        const result = await clients.policy.authorize({
          workspaceId: principal.workspaceId,
          keyId: principal.keyId,
          keyOrigin: principal.keyOrigin,
          externalId,
          toolName: body.toolName,
          toolTarget: body.toolTarget ?? '',
          actor: body.actor ?? '',
          environment: body.environment ?? '',
          parameters: Object.fromEntries(Object.entries(body.parameters ?? {}).map(([name, value]) => [name, parameterValue(value)])),
        });
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
        const { policy } = await clients.policy.putPolicy({ workspaceId: principalOf(request).workspaceId, policy: request.body.policy });
        return policyDocument(policy);
      },
    );

    app.delete(
      '/policy',
      { config: { access: { scope: 'policy' } }, schema: { tags: ['Policy'], operationId: 'deletePolicy', summary: "Delete the workspace's policy (everything is denied)", response: withErrors({ 200: PolicyDocument }) } },
      async (request) => {
        const { policy } = await clients.policy.deletePolicy({ workspaceId: principalOf(request).workspaceId });
        return policyDocument(policy);
      },
    );
  };
