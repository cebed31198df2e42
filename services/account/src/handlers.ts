import type { Pool } from '@herald/db';
import { hashSecret, isPlanName, planFacts, secretMatches, type PlanName } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import { implementService } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import type { MailSender } from '@herald/mail';
import { AccountServiceService, type Machine, type Plan, type Principal, type Site, type Workspace } from '@herald/proto/herald/account/v1/account';

import type { AccountConfig } from './config.js';
import { memberHandlers } from './members.js';
import { toApiKeyMessage, toIso, toPublicSiteMessage } from './messages.js';
import { partnerHandlers } from './partner.js';
import { passkeyHandlers } from './passkeys.js';
import * as store from './store.js';
import { secretHandlers } from './secrets.js';
import { ssoHandlers } from './sso.js';

function toPlanMessage(name: PlanName): Plan {
  const facts = planFacts(name);
  return { ...facts, monthlyNotificationAllowance: String(facts.monthlyNotificationAllowance) };
}

function subscribePageUrl(publicOrigin: string, slug: string): string {
  return `${publicOrigin}/s/${slug}`;
}

function toSiteMessage(site: store.SiteRow, publicOrigin: string): Site {
  return {
    id: site.id,
    name: site.name,
    slug: site.slug,
    domain: site.domain,
    subscribePageUrl: subscribePageUrl(publicOrigin, site.slug),
    siteKey: site.site_key,
    vapidPublicKey: site.vapid_public_key,
    createdAt: site.created_at.toISOString(),
  };
}

function toWorkspaceMessage(workspace: store.WorkspaceRow): { workspace: Workspace; plan: string } {
  return {
    workspace: {
      id: workspace.id,
      name: workspace.name,
      approvalMode: workspace.approval_mode,
      ownerExternalId: workspace.owner_external_id,
      createdAt: workspace.created_at.toISOString(),
    },
    plan: workspace.plan,
  };
}

function toMachineMessage(row: store.MachineRow): Machine {
  return {
    id: row.machine_id,
    name: row.name,
    platform: row.platform,
    keyId: row.key_id,
    firstSeenAt: row.first_seen_at.toISOString(),
    lastSeenAt: row.last_seen_at.toISOString(),
  };
}

/** Compared against when a key id is unknown, so a miss costs the same as a wrong secret. */
const decoyHash = hashSecret('decoy');

export function accountHandlers(pool: Pool, logger: Logger, config: AccountConfig, mail: MailSender) {
  const { publicOrigin, vapidSubject, enrollmentTtlSeconds } = config;
  const unauthenticated = (): HeraldError => new HeraldError('unauthorized', 'The API key is invalid, revoked or expired.', { title: 'Invalid API key' });

  /** Who an authenticated key is; undefined (unknown or wrong secret), revoked and expired keys are one 401. */
  async function principalOf(key: store.KeyForAuthentication | undefined): Promise<Principal> {
    if (!key || key.revoked_at || (key.expires_at && key.expires_at.getTime() <= Date.now())) throw unauthenticated();
    if (!isPlanName(key.plan)) throw new Error(`workspace ${key.workspace_id} has unknown plan ${key.plan}`);
    await store.touchKey(pool, key.id);
    return {
      keyId: key.id,
      keyOrigin: key.origin,
      workspaceId: key.workspace_id,
      siteId: key.site_id,
      boundExternalId: key.bound_external_id ?? '',
      ownerExternalId: key.bound_external_id ?? key.owner_external_id,
      plan: toPlanMessage(key.plan),
      approvalMode: key.approval_mode,
      keyExpiresAt: toIso(key.expires_at),
      scopes: key.scopes,
      memberId: '',
      role: '',
      keyName: key.name,
    };
  }

  return implementService(
    AccountServiceService,
    {
      async authenticateKey({ keyId, secret }) {
        const key = await store.findKeyForAuthentication(pool, keyId);
        const matches = secretMatches(secret, key?.secret_hash ?? decoyHash);
        return { principal: await principalOf(matches ? key : undefined) };
      },

      // The gateway verified an OAuth access token naming the key; only the secret check is skipped.
      async authenticateKeyId({ keyId }) {
        return { principal: await principalOf(await store.findKeyForAuthentication(pool, keyId)) };
      },

      async getIdentity({ workspaceId, keyId }) {
        const identity = await store.findIdentity(pool, workspaceId, keyId);
        if (!identity) throw new HeraldError('not_found', 'No such key in this workspace.');
        const { key, workspace, site } = identity;
        return {
          key: toApiKeyMessage(key),
          site: toSiteMessage(site, publicOrigin),
          workspace: toWorkspaceMessage(workspace).workspace,
          plan: toPlanMessage(workspace.plan),
        };
      },

      async getSite({ workspaceId }) {
        const site = await store.findSite(pool, workspaceId);
        if (!site) throw new HeraldError('not_found', 'This workspace has no site.');
        return { site: toSiteMessage(site, publicOrigin) };
      },

      async getWorkspace({ workspaceId }) {
        const workspace = await store.findWorkspace(pool, workspaceId);
        if (!workspace) throw new HeraldError('not_found', 'No such workspace.');
        return toWorkspaceMessage(workspace);
      },

      async setApprovalMode({ workspaceId, approvalMode }) {
        if (!store.isApprovalMode(approvalMode)) throw new HeraldError('invalid_request', `The approval mode must be one of ${store.APPROVAL_MODES.join(', ')}.`);
        const workspace = await store.setApprovalMode(pool, workspaceId, approvalMode);
        if (!workspace) throw new HeraldError('not_found', 'No such workspace.');
        return toWorkspaceMessage(workspace);
      },

      async countDevices({ workspaceId, externalId }) {
        const counts = await store.countDevices(pool, workspaceId, externalId);
        return { siteDevices: String(counts.site), externalIdDevices: String(counts.externalId) };
      },

      async reportMachine(request) {
        return { machine: toMachineMessage(await store.upsertMachine(pool, request)) };
      },

      async listMachines({ workspaceId }) {
        return { machines: (await store.listMachines(pool, workspaceId)).map(toMachineMessage) };
      },

      async resolveSiteKey({ siteKey }) {
        const site = await store.findSiteByKey(pool, siteKey);
        if (!site) throw new HeraldError('unauthorized', 'Unknown site key.', { title: 'Invalid site key' });
        // The identity secrets travel with the resolution the gateway caches, so it checks a
        // subscribe's proof without a second call (a rotation reaches it within the cache's TTL).
        const identitySecrets = await store.usableSecrets(pool, 'identity_secrets', site.workspace_id);
        return {
          workspaceId: site.workspace_id,
          siteId: site.id,
          domain: site.domain,
          plan: toPlanMessage(site.plan),
          identitySecrets: identitySecrets.map((row) => row.secret),
        };
      },

      async getPublicSite({ slug }) {
        const site = await store.findSiteBySlug(pool, slug);
        if (!site) throw new HeraldError('not_found', `No site ${slug}.`);
        return { site: toPublicSiteMessage(site) };
      },

      async getVapidKeys({ siteId }) {
        const keys = await store.findVapidKeys(pool, siteId);
        if (!keys) throw new HeraldError('not_found', `No site ${siteId}.`);
        return { publicKey: keys.public, privateKey: keys.private, subject: vapidSubject };
      },

      async getSendingFacts({ workspaceId }) {
        const facts = await store.findSendingFacts(pool, workspaceId);
        if (!facts) throw new HeraldError('not_found', 'This workspace has no site.');
        if (!isPlanName(facts.plan)) throw new Error(`workspace ${workspaceId} has unknown plan ${facts.plan}`);
        return { siteId: facts.site_id, signingKeysConfigured: facts.signing_keys_configured, plan: toPlanMessage(facts.plan) };
      },

      ...partnerHandlers(pool, { publicOrigin, enrollmentTtlSeconds }),
      ...secretHandlers(pool),
      ...memberHandlers(pool, mail, logger, config),
      ...passkeyHandlers(pool, logger, config),
      ...ssoHandlers(pool, logger, config),
    },
    logger,
  );
}
