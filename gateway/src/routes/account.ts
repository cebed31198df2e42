import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Site, Workspace } from '@herald/proto/herald/account/v1/account';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { countChannels } from '../reachability.js';
import { Nullable, orNull, withErrors } from '../schemas/common.js';

/** GET /identity, /site, /channels, /machines; GET and PATCH /workspace (its approval mode). */

const SiteRecord = Type.Object({
  id: Type.String(),
  name: Type.String(),
  slug: Type.String(),
  domain: Type.String(),
  subscribePageUrl: Type.String(),
  siteKey: Type.String({ description: 'Public site key (pk_<id>) for the browser SDK' }),
  vapidPublicKey: Type.String({ description: 'VAPID public key, base64url (applicationServerKey)' }),
  createdAt: Type.String(),
});

const ApprovalMode = Type.Union([Type.Literal('browser'), Type.Literal('terminal')], {
  description: 'browser: a question is pushed to the approvers\' devices, Slack and email; terminal: it is stored and no push is sent (the person answers at its liveUrl)',
});

const WorkspaceRecord = Type.Object({
  id: Type.String(),
  name: Type.String(),
  plan: Type.String(),
  approvalMode: ApprovalMode,
  createdAt: Type.String(),
});

function workspaceRecord({ workspace, plan }: { workspace?: Workspace | undefined; plan: string }) {
  if (!workspace) throw new Error('account service returned no workspace');
  return { id: workspace.id, name: workspace.name, plan, approvalMode: workspace.approvalMode as 'browser' | 'terminal', createdAt: workspace.createdAt };
}

const PlanRecord = Type.Object({
  name: Type.String(),
  active: Type.Boolean(),
  apiAccess: Type.Boolean(),
  partner: Type.Boolean(),
  rateLimitPerMinute: Type.Integer(),
  monthlyNotificationAllowance: Type.Integer(),
});

const IdentityRecord = Type.Object({
  key: Type.Object({
    id: Type.String(),
    name: Type.String(),
    origin: Type.String({ description: 'dashboard | runtime | connector | bound' }),
    scopes: Type.Array(Type.String()),
    boundExternalId: Nullable(Type.String()),
    createdAt: Type.String(),
    lastUsedAt: Nullable(Type.String()),
    expiresAt: Nullable(Type.String()),
  }),
  site: SiteRecord,
  workspace: Type.Object({ id: Type.String(), name: Type.String(), approvalMode: Type.String() }),
  plan: PlanRecord,
});

const ChannelCounts = Type.Object({
  nativeAppDevices: Type.Integer(),
  browserSubscriptions: Type.Integer(),
});

const ChannelsRecord = Type.Object({
  keyOwner: Type.Object({
    externalId: Type.String(),
    nativeAppDevices: Type.Integer(),
    browserSubscriptions: Type.Integer(),
    reachable: Type.Boolean(),
  }),
  site: ChannelCounts,
});

const MachineRecord = Type.Object({
  id: Type.String(),
  name: Type.String(),
  platform: Type.String(),
  keyId: Type.String(),
  firstSeenAt: Type.String(),
  lastSeenAt: Type.String(),
});

function siteRecord(site: Site | undefined): Site {
  if (!site) throw new Error('account service returned no site');
  return site;
}

export const accountRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      '/identity',
      { config: { access: { scope: 'identity' } }, schema: { tags: ['Account'], operationId: 'getIdentity', summary: 'Identify the calling key, its site, workspace and plan', response: withErrors({ 200: IdentityRecord }) } },
      async (request) => {
        const principal = principalOf(request);
        const identity = await clients.account.getIdentity({ workspaceId: principal.workspaceId, keyId: principal.keyId });
        const { key, workspace, plan } = identity;
        if (!key || !workspace || !plan) throw new Error('account service returned an incomplete identity');
        return {
          key: {
            id: key.id,
            name: key.name,
            origin: key.origin,
            scopes: key.scopes,
            boundExternalId: orNull(key.boundExternalId),
            createdAt: key.createdAt,
            lastUsedAt: orNull(key.lastUsedAt),
            expiresAt: orNull(key.expiresAt),
          },
          site: siteRecord(identity.site),
          workspace: { id: workspace.id, name: workspace.name, approvalMode: workspace.approvalMode },
          plan: { ...plan, monthlyNotificationAllowance: Number(plan.monthlyNotificationAllowance) },
        };
      },
    );

    app.get('/site', { config: { access: { scope: 'account' } }, schema: { tags: ['Account'], operationId: 'getSite', summary: 'Read the site', response: withErrors({ 200: SiteRecord }) } }, async (request) => {
      const { site } = await clients.account.getSite({ workspaceId: principalOf(request).workspaceId });
      return siteRecord(site);
    });

    app.get(
      '/workspace',
      { config: { access: { scope: 'account' } }, schema: { tags: ['Account'], operationId: 'getWorkspace', summary: 'Read the workspace: its name, plan and approval mode', response: withErrors({ 200: WorkspaceRecord }) } },
      async (request) => workspaceRecord(await clients.account.getWorkspace({ workspaceId: principalOf(request).workspaceId })),
    );

    app.patch(
      '/workspace',
      {
        // A workspace setting: dashboard keys, owners and admins (like the Slack connection).
        config: { access: { scope: 'webhooks' } },
        schema: {
          tags: ['Account'],
          operationId: 'updateWorkspace',
          summary: 'Change the approval mode',
          description: 'Keys and sessions carry the mode: a change applies to calls authenticated after it (a verified key is cached for KEY_CACHE_TTL_MS at most).',
          body: Type.Object({ approvalMode: ApprovalMode }, { additionalProperties: false }),
          response: withErrors({ 200: WorkspaceRecord }),
        },
      },
      async (request) => workspaceRecord(await clients.account.setApprovalMode({ workspaceId: principalOf(request).workspaceId, approvalMode: request.body.approvalMode })),
    );

    app.get(
      '/channels',
      { config: { access: { scope: 'account' } }, schema: { tags: ['Account'], operationId: 'getChannels', summary: 'Count the live channels of the key owner and the site', response: withErrors({ 200: ChannelsRecord }) } },
      async (request) => {
        const { workspaceId, ownerExternalId } = principalOf(request);
        const { user, site } = await countChannels(clients, workspaceId, ownerExternalId);
        return {
          keyOwner: { externalId: ownerExternalId, ...user },
          site: { nativeAppDevices: site.nativeAppDevices, browserSubscriptions: site.browserSubscriptions },
        };
      },
    );

    app.get(
      '/machines',
      {
        config: { access: { scope: 'account' } },
        schema: { tags: ['Account'], operationId: 'listMachines', summary: 'List the machines agents reported from', response: withErrors({ 200: Type.Object({ machines: Type.Array(MachineRecord) }) }) },
      },
      async (request) => clients.account.listMachines({ workspaceId: principalOf(request).workspaceId }),
    );

    app.post(
      '/machines',
      {
        config: { access: { scope: 'account' } },
        schema: {
          tags: ['Account'],
          operationId: 'reportMachine',
          summary: 'Report the machine this key runs on',
          body: Type.Object(
            {
              machineId: Type.String({ pattern: '^[A-Za-z0-9._:-]{1,128}$', description: 'Stable id chosen by the client' }),
              name: Type.Optional(Type.String({ maxLength: 200 })),
              platform: Type.Optional(Type.String({ maxLength: 100 })),
            },
            { additionalProperties: false },
          ),
          response: withErrors({ 200: Type.Object({ machine: MachineRecord }) }),
        },
      },
      async (request) => {
        const { workspaceId, keyId } = principalOf(request);
        const { machineId, name = '', platform = '' } = request.body;
        const { machine } = await clients.account.reportMachine({ workspaceId, keyId, machineId, name, platform });
        return { machine: machine as NonNullable<typeof machine> };
      },
    );
  };
