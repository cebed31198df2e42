import { randomUUID } from 'node:crypto';

import { pageRequest, type Pool } from '@herald/db';
import { HeraldError, invalidFields } from '@herald/errors';
import { implementService } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import {
  PolicyServiceService,
  type AuthorizeRequest,
  type Changer,
  type GetPolicyResponse,
  type ParameterValue,
  type PolicyVersion,
} from '@herald/proto/herald/policy/v1/policy';

import type { PolicyCache } from './cache.js';
import { compile, evaluate, evaluateOnce, type CompiledPolicy, type Decision, type ToolCall } from './cedar.js';
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

/** The tool call of an AuthorizeRequest (also the sample of an EvaluatePolicyRequest). */
function toolCall(request: AuthorizeRequest | undefined): ToolCall {
  if (!request?.toolName) throw new HeraldError('invalid_request', 'toolName is required');
  return {
    keyId: request.keyId,
    keyOrigin: request.keyOrigin,
    externalId: orUndefined(request.externalId),
    actor: orUndefined(request.actor),
    toolName: request.toolName,
    toolTarget: orUndefined(request.toolTarget),
    environment: orUndefined(request.environment),
    parameters: Object.fromEntries(Object.entries(request.parameters).map(([name, value]) => [name, scalar(value)])),
  };
}

/** A policy text checked as PutPolicy stores it: at most MAX_POLICY_BYTES, parsed and validated whole (else 400 with its problems). */
function validated(text: string): CompiledPolicy {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_POLICY_BYTES) {
    throw new HeraldError('invalid_request', `The policy is ${bytes} bytes; at most ${MAX_POLICY_BYTES} are allowed.`, {
      title: 'Policy too large',
      extra: { fields: [{ field: 'policy', in: 'body', problem: `must be at most ${MAX_POLICY_BYTES} bytes` }] },
    });
  }
  const result = compile(text);
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
  return result.compiled;
}

function changer(changedBy: Changer | undefined): store.Changer | undefined {
  if (!changedBy?.id) return undefined;
  if (changedBy.kind !== 'key' && changedBy.kind !== 'member') throw new HeraldError('invalid_request', `unknown changer kind "${changedBy.kind}"`);
  return { kind: changedBy.kind, id: changedBy.id };
}

function versionView(row: store.VersionRow): PolicyVersion {
  return {
    version: row.version,
    present: row.present,
    policy: row.policy ?? '',
    ...(row.changed_by_kind && row.changed_by_id ? { changedBy: { kind: row.changed_by_kind, id: row.changed_by_id } } : {}),
    createdAt: row.created_at.toISOString(),
  };
}

export function policyHandlers(pool: Pool, cache: PolicyCache, logger: Logger) {
  /** The verdict of the workspace's saved policy, and its version; fail-closed. */
  async function decideSaved(workspaceId: string, call: ToolCall): Promise<{ version: string; decision: Decision }> {
    try {
      const loaded = await cache.current(workspaceId);
      return {
        version: loaded.version,
        decision: loaded.compiled ? evaluate(loaded.setId, loaded.compiled, call) : { verdict: 'deny', policyId: null, reason: 'no policy' },
      };
    } catch (err) {
      // Fail closed: a policy that cannot be loaded allows nothing.
      logger.error({ err, workspaceId }, 'policy could not be loaded');
      return { version: '0', decision: { verdict: 'deny', policyId: null, reason: 'evaluation error: the workspace policy could not be loaded' } };
    }
  }

  return implementService(
    PolicyServiceService,
    {
      async authorize(request) {
        const call = toolCall(request);
        const { version, decision } = await decideSaved(request.workspaceId, call);
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
        validated(request.policy);
        const row = await store.writePolicy(pool, request.workspaceId, request.policy, changer(request.changedBy));
        cache.install(request.workspaceId, row.version, row.policy);
        logger.info({ workspaceId: request.workspaceId, version: row.version }, 'policy replaced');
        return { policy: policyView(row) };
      },

      async deletePolicy(request) {
        const row = await store.writePolicy(pool, request.workspaceId, null, changer(request.changedBy));
        cache.install(request.workspaceId, row.version, null);
        logger.info({ workspaceId: request.workspaceId, version: row.version }, 'policy removed');
        return { policy: policyView(row) };
      },

      async listPolicyVersions({ workspaceId, limit, cursor }) {
        const request = pageRequest(limit, cursor);
        // A version's cursor names it by number; a well-formed cursor of another list does not.
        if (request.after && !/^[1-9]\d{0,17}$/.test(request.after.id)) {
          throw invalidFields('querystring', [{ field: 'cursor', in: 'querystring', problem: 'is not a cursor returned by this endpoint' }]);
        }
        const rows = await store.listVersions(pool, workspaceId, request.after?.id, request.fetch);
        const { rows: shown, nextCursor } = request.page(rows.map((row) => ({ ...row, id: row.version })));
        return { versions: shown.map(versionView), nextCursor };
      },

      async getPolicyVersion({ workspaceId, version }) {
        const row = await store.findVersion(pool, workspaceId, version);
        if (!row) throw new HeraldError('not_found', `No version ${version} of this workspace's policy.`, { title: 'Not found' });
        return { version: versionView(row) };
      },

      async evaluatePolicy(request) {
        const call = toolCall(request.call);
        if (request.draft === undefined) {
          const { version, decision } = await decideSaved(request.call?.workspaceId ?? '', call);
          return { verdict: decision.verdict, policyId: decision.policyId ?? '', reason: decision.reason, version };
        }
        const decision = evaluateOnce(validated(request.draft), call);
        return { verdict: decision.verdict, policyId: decision.policyId ?? '', reason: decision.reason, version: '0' };
      },
    },
    logger,
  );
}
