import { randomUUID } from 'node:crypto';

import type { Pool } from '@herald/db';
import { HeraldError } from '@herald/errors';
import { implementService } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import { PolicyServiceService, type GetPolicyResponse, type ParameterValue } from '@herald/proto/herald/policy/v1/policy';

import type { PolicyCache } from './cache.js';
import { compile, evaluate, type Decision, type ToolCall } from './cedar.js';
import { countVerdict } from './metrics.js';
import * as store from './store.js';

/** At most this many bytes of Cedar text per workspace. */
export const MAX_POLICY_BYTES = 65_536;

function policyView(row: store.PolicyRow | undefined): GetPolicyResponse {
  return {
    present: row?.policy != null,
    policy: row?.policy ?? '',
    version: row?.version ?? '0',
    updatedAt: row?.updated_at.toISOString() ?? '',
  };
}

function scalar(value: ParameterValue | undefined): string | number | boolean | null {
  const kind = value?.kind;
  if (!kind) return null;
  return kind.value;
}

const orUndefined = (value: string): string | undefined => (value === '' ? undefined : value);

export function policyHandlers(pool: Pool, cache: PolicyCache, logger: Logger) {
  return implementService(
    PolicyServiceService,
    {
      async authorize(request) {
        if (!request.toolName) throw new HeraldError('invalid_request', 'toolName is required');
        const call: ToolCall = {
          keyId: request.keyId,
          keyOrigin: request.keyOrigin,
          externalId: orUndefined(request.externalId),
          actor: orUndefined(request.actor),
          toolName: request.toolName,
          toolTarget: orUndefined(request.toolTarget),
          environment: orUndefined(request.environment),
          parameters: Object.fromEntries(Object.entries(request.parameters).map(([name, value]) => [name, scalar(value)])),
        };
        let version = '0';
        let decision: Decision;
        try {
          const loaded = await cache.current(request.workspaceId);
          version = loaded.version;
          decision = loaded.compiled ? evaluate(loaded.setId, loaded.compiled, call) : { verdict: 'deny', policyId: null, reason: 'no policy' };
        } catch (err) {
          // Fail closed: a policy that cannot be loaded allows nothing.
          logger.error({ err, workspaceId: request.workspaceId }, 'policy could not be loaded');
          decision = { verdict: 'deny', policyId: null, reason: 'evaluation error: the workspace policy could not be loaded' };
        }
        const authorizationId = `authz_${randomUUID().replaceAll('-', '')}`;
        const { keyId: _keyId, keyOrigin: _origin, ...recorded } = call;
        await store.recordAuthorization(pool, {
          id: authorizationId,
          workspaceId: request.workspaceId,
          keyId: request.keyId,
          request: recorded,
          verdict: decision.verdict,
          policyId: decision.policyId,
          reason: decision.reason,
          policyVersion: version,
        });
        countVerdict(decision.verdict);
        return { verdict: decision.verdict, policyId: decision.policyId ?? '', reason: decision.reason, authorizationId };
      },

      async getPolicy(request) {
        return policyView(await store.findPolicy(pool, request.workspaceId));
      },

      async putPolicy(request) {
        const bytes = Buffer.byteLength(request.policy, 'utf8');
        if (bytes > MAX_POLICY_BYTES) {
          throw new HeraldError('invalid_request', `The policy is ${bytes} bytes; at most ${MAX_POLICY_BYTES} are allowed.`, {
            title: 'Policy too large',
            extra: { fields: [{ field: 'policy', in: 'body', problem: `must be at most ${MAX_POLICY_BYTES} bytes` }] },
          });
        }
        const result = compile(request.policy);
        if (!result.ok) {
          const first = result.problems[0];
          const where = first?.line !== undefined ? ` at line ${first.line}, column ${first.column}` : '';
          const which = first?.policyId !== undefined ? ` (policy ${first.policyId})` : '';
          throw new HeraldError('invalid_request', `The policy is invalid${where}${which}: ${first?.message ?? 'unknown problem'}`, {
            title: 'Invalid policy',
            hint: 'Nothing was changed: the previous policy stays in force. See the Herald Cedar schema in the documentation.',
            extra: { problems: result.problems },
          });
        }
        const row = await store.writePolicy(pool, request.workspaceId, request.policy);
        cache.install(request.workspaceId, row.version, row.policy);
        logger.info({ workspaceId: request.workspaceId, version: row.version }, 'policy replaced');
        return { policy: policyView(row) };
      },

      async deletePolicy(request) {
        const row = await store.writePolicy(pool, request.workspaceId, null);
        cache.install(request.workspaceId, row.version, null);
        logger.info({ workspaceId: request.workspaceId, version: row.version }, 'policy removed');
        return { policy: policyView(row) };
      },
    },
    logger,
  );
}
