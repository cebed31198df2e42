import type { Member } from '@herald/proto/herald/account/v1/account';
import { Type } from '@sinclair/typebox';

import { Nullable, orNull } from './common.js';

/** A workspace member, as /members and /me show one. */

export const Email = Type.String({ minLength: 3, maxLength: 254, pattern: '^[^\\s@]+@[^\\s@]+$', description: 'An email address (compared case-insensitively)' });

export const MemberRecord = Type.Object({
  id: Type.String(),
  email: Type.String(),
  displayName: Type.String(),
  role: Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('marketer'), Type.Literal('approver'), Type.Literal('viewer')]),
  status: Type.Union([Type.Literal('invited'), Type.Literal('active'), Type.Literal('removed')]),
  createdAt: Type.String(),
  lastSignInAt: Nullable(Type.String()),
});

export function memberRecord(member: Member | undefined) {
  if (!member) throw new Error('account service returned no member');
  return {
    id: member.id,
    email: member.email,
    displayName: member.displayName,
    role: member.role as 'owner' | 'admin' | 'marketer' | 'approver' | 'viewer',
    status: member.status as 'invited' | 'active' | 'removed',
    createdAt: member.createdAt,
    lastSignInAt: orNull(member.lastSignInAt),
  };
}
