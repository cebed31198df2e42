import type { Pool } from '@herald/db';
import { hashSecret, isPlanName, isRole, newSecret, planFacts, randomId, type Role } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type { Logger } from '@herald/logging';
import type { MailSender } from '@herald/mail';
import type {
  AuthenticateSessionRequest,
  AuthenticateSessionResponse,
  ConsumeSignInLinkRequest,
  ConsumeSignInLinkResponse,
  InviteMemberRequest,
  InviteMemberResponse,
  ListMembersRequest,
  ListMembersResponse,
  Member,
  RemoveMemberRequest,
  RemoveMemberResponse,
  RequestSignInLinkRequest,
  RequestSignInLinkResponse,
  RevokeSessionsRequest,
  RevokeSessionsResponse,
} from '@herald/proto/herald/account/v1/account';

import { toIso } from './messages.js';
import * as store from './store.js';

/**
 * Workspace members: invites, sign-in by single-use email link, sessions. Tokens and session ids
 * are 256 random bits; only their SHA-256 is stored. The mail goes out through @herald/mail.
 */

export interface MemberSettings {
  publicOrigin: string;
  signInLinkTtlSeconds: number;
  sessionIdleSeconds: number;
  sessionMaxSeconds: number;
}

/** GET /members answers at most this many. */
const MAX_LISTED_MEMBERS = 1_000;

export const normaliseEmail = (email: string): string => email.trim().toLowerCase();

export function toMemberMessage(member: store.MemberRow): Member {
  return {
    id: member.id,
    workspaceId: member.workspace_id,
    email: member.email,
    displayName: member.display_name,
    role: member.role,
    status: member.status,
    createdAt: member.created_at.toISOString(),
    lastSignInAt: toIso(member.last_sign_in_at),
  };
}

const signInUrl = (publicOrigin: string, token: string): string => `${publicOrigin}/sign-in/${token}`;

/** A new session's id (the cookie's value, never stored) and the row a sign-in stores for it. */
export function newSession({ sessionIdleSeconds, sessionMaxSeconds }: MemberSettings): { sessionId: string; session: store.NewSession } {
  const sessionId = newSecret();
  return { sessionId, session: { idHash: hashSecret(sessionId), csrfToken: newSecret(), idleSeconds: sessionIdleSeconds, maxSeconds: sessionMaxSeconds } };
}

/** A fresh single-use sign-in link for the member. */
export async function issueSignInLink(pool: Pool, memberId: string, { publicOrigin, signInLinkTtlSeconds }: MemberSettings): Promise<{ url: string; expiresAt: Date }> {
  const token = newSecret();
  const expiresAt = await store.createSignInLink(pool, { tokenHash: hashSecret(token), memberId, ttlSeconds: signInLinkTtlSeconds });
  return { url: signInUrl(publicOrigin, token), expiresAt };
}

/** Adds a member; ALREADY_EXISTS when the address is one. Role rules are the caller's. */
export async function addMember(pool: Pool, workspaceId: string, { email, displayName, role }: { email: string; displayName: string; role: Role }): Promise<store.MemberRow> {
  const member = await store.insertMember(pool, { id: `mem_${randomId()}`, workspaceId, email: normaliseEmail(email), displayName, role }).catch((err: unknown) => {
    // foreign_key_violation: no such workspace.
    if ((err as { code?: string }).code === '23503') throw new HeraldError('not_found', `No workspace ${workspaceId}.`);
    throw err;
  });
  if (!member) throw new HeraldError('conflict', `${normaliseEmail(email)} is already a member of this workspace.`, { title: 'Already a member' });
  return member;
}

function roleOf(value: string): Role {
  if (!isRole(value)) throw new HeraldError('invalid_request', `Unknown role "${value}".`);
  return value;
}

/** Only an owner makes or removes an owner; an API key (no actor role) acts as an admin. */
function assertMayManage(actorRole: string, targetRole: Role, action: string): void {
  if (targetRole === 'owner' && actorRole !== 'owner') {
    throw new HeraldError('forbidden', `Only an owner may ${action} an owner.`, { title: 'Permission denied' });
  }
}

export function memberHandlers(pool: Pool, mail: MailSender, logger: Logger, settings: MemberSettings) {
  const unauthenticated = (): HeraldError =>
    new HeraldError('unauthorized', 'The session is invalid or has expired; sign in again.', { title: 'Invalid session' });
  const badLink = (): HeraldError =>
    new HeraldError('not_found', 'This sign-in link is invalid, used or expired.', { title: 'Sign-in link not usable', hint: 'Ask for a new sign-in link.' });

  /** Sent after the answer, so the timing says nothing about membership; a failure is logged. */
  function mailLink(member: store.MemberRow, subject: string, intro: string): void {
    void issueSignInLink(pool, member.id, settings)
      .then(({ url }) =>
        mail.send({
          to: member.email,
          subject,
          text: `${intro}\n\nSign in: ${url}\n\nThe link works once, for ${Math.round(settings.signInLinkTtlSeconds / 60)} minutes. If you did not ask for it, ignore this message.\n`,
        }),
      )
      .catch((err: unknown) => logger.error({ err, memberId: member.id }, 'sign-in mail not sent'));
  }

  return {
    async authenticateSession({ sessionId }: AuthenticateSessionRequest): Promise<AuthenticateSessionResponse> {
      const session = sessionId ? await store.findLiveSession(pool, hashSecret(sessionId), settings.sessionIdleSeconds) : undefined;
      if (!session) throw unauthenticated();
      if (!isPlanName(session.plan)) throw new Error(`workspace ${session.member.workspace_id} has unknown plan ${session.plan}`);
      const facts = planFacts(session.plan);
      const { member } = session;
      return {
        principal: {
          keyId: member.id,
          keyOrigin: 'session',
          workspaceId: member.workspace_id,
          siteId: session.site_id,
          boundExternalId: '',
          ownerExternalId: session.owner_external_id,
          plan: { ...facts, monthlyNotificationAllowance: String(facts.monthlyNotificationAllowance) },
          approvalMode: session.approval_mode,
          keyExpiresAt: '',
          scopes: [],
          memberId: member.id,
          role: member.role,
          keyName: '',
        },
        member: toMemberMessage(member),
        workspaceName: session.workspace_name,
        csrfToken: session.csrf_token,
      };
    },

    async requestSignInLink({ email }: RequestSignInLinkRequest): Promise<RequestSignInLinkResponse> {
      for (const member of await store.findMembershipsByEmail(pool, normaliseEmail(email))) {
        mailLink(member, 'Your Herald sign-in link', `Someone (hopefully you) asked to sign in to Herald as ${member.email}.`);
      }
      return {};
    },

    async consumeSignInLink({ token }: ConsumeSignInLinkRequest): Promise<ConsumeSignInLinkResponse> {
      const { sessionId, session } = newSession(settings);
      const outcome = await store.consumeSignInLink(pool, hashSecret(token), session);
      if (outcome?.state !== 'signed_in') throw badLink();
      return { sessionId, member: toMemberMessage(outcome.member), expiresAt: outcome.expiresAt.toISOString() };
    },

    async revokeSessions({ workspaceId, memberId, sessionId }: RevokeSessionsRequest): Promise<RevokeSessionsResponse> {
      return { revoked: await store.revokeSessions(pool, workspaceId, memberId, sessionId ? hashSecret(sessionId) : undefined) };
    },

    async listMembers({ workspaceId }: ListMembersRequest): Promise<ListMembersResponse> {
      return { members: (await store.listMembers(pool, workspaceId, MAX_LISTED_MEMBERS)).map(toMemberMessage) };
    },

    async inviteMember({ workspaceId, email, displayName, role, actorRole }: InviteMemberRequest): Promise<InviteMemberResponse> {
      const granted = roleOf(role);
      assertMayManage(actorRole, granted, 'invite');
      const member = await addMember(pool, workspaceId, { email, displayName, role: granted });
      mailLink(member, 'You are invited to Herald', `You are invited to a Herald workspace as ${granted}.`);
      return { member: toMemberMessage(member) };
    },

    async removeMember({ workspaceId, memberId, actorRole }: RemoveMemberRequest): Promise<RemoveMemberResponse> {
      const existing = await store.findMember(pool, workspaceId, memberId);
      if (!existing) throw new HeraldError('not_found', `No member ${memberId} in this workspace.`);
      assertMayManage(actorRole, existing.role, 'remove');
      const removed = await store.removeMember(pool, workspaceId, memberId);
      if (!removed) throw new HeraldError('not_found', `No member ${memberId} in this workspace.`);
      return { member: toMemberMessage(removed) };
    },
  };
}
