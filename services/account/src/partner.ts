import type { Pool } from '@herald/db';
import { hashSecret, isPlanName, newSecret, planFacts } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type {
  ConsumeEnrollmentRequest,
  ConsumeEnrollmentResponse,
  CreateBoundKeyRequest,
  CreateBoundKeyResponse,
  CreateEnrollmentRequest,
  CreateEnrollmentResponse,
  GetEnrollmentRequest,
  GetEnrollmentResponse,
  ListBoundKeysRequest,
  ListBoundKeysResponse,
  RevokeBoundKeyRequest,
  RevokeBoundKeyResponse,
} from '@herald/proto/herald/account/v1/account';

import { toApiKeyMessage, toPublicSiteMessage } from './messages.js';
import { issueKey } from './provisioning.js';
import * as store from './store.js';

/** The Partner plan's bound keys, and single-use enrollment links (Partner enrollment and pairing on every plan). */

/** GET /keys answers at most this many keys, newest first. */
const MAX_LISTED_KEYS = 1_000;

const noSuchKey = (keyId: string) => new HeraldError('not_found', `No bound key ${keyId} in this workspace.`);
const noSuchLink = () =>
  new HeraldError('not_found', 'This enrollment link does not exist.', { title: 'Enrollment link not found', hint: 'Ask for a new enrollment link.' });

/**
 * Enrollment links (POST /enroll) work only while the workspace is still on the Partner plan;
 * pairing links (POST /pair) are the same single-use mechanism on every plan.
 */
const usable = (enrollment: store.EnrollmentRow): boolean => enrollment.pairing || (isPlanName(enrollment.site.plan) && planFacts(enrollment.site.plan).partner);

export interface PartnerOptions {
  publicOrigin: string;
  enrollmentTtlSeconds: number;
}

export function partnerHandlers(pool: Pool, { publicOrigin, enrollmentTtlSeconds }: PartnerOptions) {
  const boundKey = async (workspaceId: string, keyId: string) => {
    const key = await store.findBoundKey(pool, workspaceId, keyId);
    if (!key) throw noSuchKey(keyId);
    return toApiKeyMessage(key);
  };

  return {
    async createBoundKey({ workspaceId, externalId, name, expiresInSeconds }: CreateBoundKeyRequest): Promise<CreateBoundKeyResponse> {
      const { keyId, apiKey } = await issueKey(pool, {
        workspaceId,
        origin: 'bound',
        boundExternalId: externalId,
        ...(name ? { name } : {}),
        ...(expiresInSeconds > 0 ? { expiresAt: new Date(Date.now() + expiresInSeconds * 1_000) } : {}),
      });
      return { key: await boundKey(workspaceId, keyId), apiKey };
    },

    async listBoundKeys({ workspaceId, externalId }: ListBoundKeysRequest): Promise<ListBoundKeysResponse> {
      const keys = await store.listBoundKeys(pool, workspaceId, externalId || null, MAX_LISTED_KEYS);
      return { keys: keys.map(toApiKeyMessage) };
    },

    async revokeBoundKey({ workspaceId, keyId }: RevokeBoundKeyRequest): Promise<RevokeBoundKeyResponse> {
      // Only bound keys are revoked here; a revoked one stays as it is (idempotent).
      const existing = await boundKey(workspaceId, keyId);
      if (existing.revoked) return { key: existing };
      await store.revokeKey(pool, keyId, workspaceId);
      return { key: await boundKey(workspaceId, keyId) };
    },

    async createEnrollment({ workspaceId, externalId, keyId, pairing }: CreateEnrollmentRequest): Promise<CreateEnrollmentResponse> {
      const token = newSecret();
      const expiresAt = await store.createEnrollment(pool, { tokenHash: hashSecret(token), workspaceId, externalId, keyId, ttlSeconds: enrollmentTtlSeconds, pairing });
      if (!expiresAt) throw new HeraldError('not_found', 'This workspace has no site.');
      return { token, enrollmentUrl: `${publicOrigin}/enroll/${token}`, expiresAt: expiresAt.toISOString() };
    },

    async getEnrollment({ token }: GetEnrollmentRequest): Promise<GetEnrollmentResponse> {
      const enrollment = await store.findEnrollment(pool, hashSecret(token));
      if (!enrollment) throw noSuchLink();
      return {
        state: enrollment.state === 'active' && !usable(enrollment) ? 'unavailable' : enrollment.state,
        externalId: enrollment.external_id,
        expiresAt: enrollment.expires_at.toISOString(),
        site: toPublicSiteMessage(enrollment.site),
        pairing: enrollment.pairing,
      };
    },

    async consumeEnrollment({ token }: ConsumeEnrollmentRequest): Promise<ConsumeEnrollmentResponse> {
      const tokenHash = hashSecret(token);
      const enrollment = await store.findEnrollment(pool, tokenHash);
      if (!enrollment) throw noSuchLink();
      if (!usable(enrollment)) {
        throw new HeraldError('plan_upgrade_required', 'Enrollment requires the Partner plan.', { title: 'Plan upgrade required' });
      }
      const result = await store.consumeEnrollment(pool, tokenHash);
      if (!result) throw noSuchLink();
      if (result.state !== 'claimed') {
        throw result.state === 'used'
          ? new HeraldError('conflict', 'This enrollment link has already been used.', {
              title: 'Enrollment link already used',
              hint: 'Each link works once; ask for a new enrollment link.',
            })
          : new HeraldError('gone', 'This enrollment link has expired.', { title: 'Enrollment link expired', hint: 'Ask for a new enrollment link.' });
      }
      return { workspaceId: result.workspace_id, siteId: result.site_id, externalId: result.external_id };
    },
  };
}
