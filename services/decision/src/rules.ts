import { createHash } from 'node:crypto';

import type { Approver } from '@herald/domain';
import type { CreateQuestionRequest } from '@herald/proto/herald/decision/v1/decision';

/** The decision service's rules about its own data, each written once. */

/** Fail closed: only a person's explicit yes to a confirm question approves; pending, expired, cancelled and any other answer never do. */
export function isApproved(row: { status: string; type: string; answer: string | null }): boolean {
  return row.status === 'answered' && row.type === 'confirm' && row.answer === 'yes';
}

/**
 * What makes two requests to open a decision "the same" for an idempotent replay: what the
 * caller asked, not how it waits nor what the service found (reachability, the approval mode).
 */
export function requestHash(
  request: Pick<
    CreateQuestionRequest,
    | 'type'
    | 'question'
    | 'options'
    | 'context'
    | 'placeholder'
    | 'agentName'
    | 'audience'
    | 'externalId'
    | 'callbackUrl'
    | 'toolName'
    | 'toolTarget'
    | 'parametersJson'
    | 'lifetimeSeconds'
    | 'requireReachable'
  >,
  { approvers, escalation }: { approvers: Approver[]; escalation: unknown[] },
): string {
  const asked = [
    request.type,
    request.question,
    request.options,
    request.context,
    request.placeholder,
    request.agentName,
    request.audience,
    request.externalId,
    request.callbackUrl,
    request.toolName,
    request.toolTarget,
    request.parametersJson,
    request.lifetimeSeconds,
    request.requireReachable,
    // Only when named, so a request without them hashes as it did before they existed.
    ...(approvers.length > 0 || escalation.length > 0 ? [approvers, escalation] : []),
  ];
  return createHash('sha256').update(JSON.stringify(asked)).digest('base64url');
}
