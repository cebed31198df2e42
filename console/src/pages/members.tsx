import { ROLES } from '@herald/domain/scopes';
import { queryOptions, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { InviteMemberRequest, Member, Page, Role } from '@herald/sdk';
import { type FormEvent, useState } from 'react';

import { api } from '../api.js';
import { useCan, useMe } from '../session.js';
import { ConfirmDialog, ErrorNote, Table, When } from '../ui.js';

/** Members: list, invite with a role (they get a sign-in link by email), remove. Owners and admins. */

const MEMBERS = ['members'] as const;
/** The workspace's members (also read by the policy page, to name who wrote a version). */
export const membersQuery = queryOptions({ queryKey: MEMBERS, queryFn: () => api<Page<Member>>('GET', '/members') });

export function MembersPage() {
  const can = useCan();
  const me = useMe();
  const queryClient = useQueryClient();
  const members = useQuery(membersQuery);
  const [removing, setRemoving] = useState<Member | undefined>();
  const current = members.data?.data.filter((member) => member.status !== 'removed') ?? [];

  return (
    <>
      {can('members', 'POST') ? <InviteForm /> : null}
      <ErrorNote error={members.error} />
      {members.data ? (
        <Table caption="Members" columns={['Name', 'Email', 'Role', 'Status', 'Last sign-in', ...(can('members', 'DELETE') ? ['Actions'] : [])]}>
          {current.map((member) => (
            <tr key={member.id}>
              <th scope="row">{member.displayName || member.email}</th>
              <td>{member.email}</td>
              <td>{member.role}</td>
              <td>{member.status}</td>
              <td>
                <When at={member.lastSignInAt} />
              </td>
              {can('members', 'DELETE') ? (
                <td>
                  {member.id === me.member.id ? null : (
                    <button type="button" className="danger" onClick={() => setRemoving(member)} aria-label={`Remove ${member.email}`}>
                      Remove
                    </button>
                  )}
                </td>
              ) : null}
            </tr>
          ))}
        </Table>
      ) : null}
      <ConfirmDialog
        target={removing}
        title="Remove this member?"
        action="Remove"
        describe={(member) => (
          <>
            <strong>{member.email}</strong> loses access at once: their sessions end.
          </>
        )}
        run={(member) => api<Member>('DELETE', `/members/${encodeURIComponent(member.id)}`)}
        onDone={() => void queryClient.invalidateQueries({ queryKey: MEMBERS })}
        onClose={() => setRemoving(undefined)}
      />
    </>
  );
}

function InviteForm() {
  const queryClient = useQueryClient();
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const [displayName, setDisplayName] = useState('');
  const invite = useMutation({
    mutationFn: (body: InviteMemberRequest) => api<Member>('POST', '/members', body),
    onSuccess: () => {
      setEmail('');
      setDisplayName('');
      void queryClient.invalidateQueries({ queryKey: MEMBERS });
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    invite.mutate({ email, role, ...(displayName ? { displayName } : {}) });
  };
  return (
    <form className="inline" onSubmit={submit} aria-labelledby="invite-heading">
      <h2 id="invite-heading">Invite a member</h2>
      <div className="fields">
        <div>
          <label htmlFor="invite-email">Email address</label>
          <input id="invite-email" type="email" required value={email} onChange={(event) => setEmail(event.target.value)} />
        </div>
        <div>
          <label htmlFor="invite-name">Name (optional)</label>
          <input id="invite-name" value={displayName} onChange={(event) => setDisplayName(event.target.value)} />
        </div>
        <div>
          <label htmlFor="invite-role">Role</label>
          <select id="invite-role" value={role} onChange={(event) => setRole(event.target.value as Role)}>
            {ROLES.map((choice) => (
              <option key={choice} value={choice}>
                {choice}
              </option>
            ))}
          </select>
        </div>
      </div>
      <ErrorNote error={invite.error} />
      {invite.isSuccess ? <p role="status">Invited {invite.data.email}: a sign-in link is on its way to them.</p> : null}
      <button type="submit" disabled={invite.isPending}>
        Invite
      </button>
    </form>
  );
}
