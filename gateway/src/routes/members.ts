import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ROLES } from '@herald/domain';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { ErrorResponse, PageOf, withErrors } from '../schemas/common.js';
import { Email, memberRecord, MemberRecord } from '../schemas/members.js';

/**
 * GET/POST /members and DELETE /members/{memberId}: the workspace's people. An invite mails the
 * new member a sign-in link. Only an owner makes or removes an owner (an API key acts as an admin).
 */

const access = { scope: 'members' } as const;
const MemberId = Type.Object({ memberId: Type.String({ minLength: 1, maxLength: 64 }) });

export const memberRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      '/members',
      { config: { access }, schema: { tags: ['Members'], operationId: 'listMembers', summary: "List the workspace's members (removed ones included)", response: withErrors({ 200: PageOf(MemberRecord) }) } },
      async (request) => {
        const { members } = await clients.account.listMembers({ workspaceId: principalOf(request).workspaceId });
        return { data: members.map(memberRecord), hasMore: false, nextCursor: null };
      },
    );

    app.post(
      '/members',
      {
        config: { access },
        schema: {
          tags: ['Members'],
          operationId: 'inviteMember',
          summary: 'Invite a member with a role: they get a sign-in link by email',
          body: Type.Object(
            {
              email: Email,
              role: Type.Union(ROLES.map((role) => Type.Literal(role))),
              displayName: Type.Optional(Type.String({ maxLength: 200 })),
            },
            { additionalProperties: false },
          ),
          response: withErrors({ 201: MemberRecord, 409: ErrorResponse }),
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const { member } = await clients.account.inviteMember({
          workspaceId: principal.workspaceId,
          email: request.body.email,
          role: request.body.role,
          displayName: request.body.displayName ?? '',
          actorRole: principal.role,
        });
        return reply.code(201).send(memberRecord(member));
      },
    );

    app.delete(
      '/members/:memberId',
      {
        config: { access },
        schema: { tags: ['Members'], operationId: 'removeMember', summary: 'Remove a member: their sessions end at once', params: MemberId, response: withErrors({ 200: MemberRecord }) },
      },
      async (request) => {
        const principal = principalOf(request);
        const { member } = await clients.account.removeMember({ workspaceId: principal.workspaceId, memberId: request.params.memberId, actorRole: principal.role });
        return memberRecord(member);
      },
    );
  };
