import { scopesForOrigin } from '@herald/domain/scopes';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { BoundKey, CreatedKey, CreateKeyRequest } from '@herald/sdk';
import { type FormEvent, useState } from 'react';

import { api } from '../api.js';
import { useCan } from '../session.js';
import { ConfirmDialog, Dialog, ErrorNote, Table, When } from '../ui.js';

/**
 * API keys: list (with last use), create (shown once), revoke. The REST API issues keys of one
 * origin, "bound" (POST /keys, Partner plan): each acts for one end-user, with that origin's scopes.
 */

const KEYS = ['keys'] as const;
const BOUND_SCOPES = scopesForOrigin('bound').join(', ');

const EXPIRIES: Array<{ label: string; seconds?: number }> = [
  { label: 'Never' },
  { label: '1 day', seconds: 86_400 },
  { label: '30 days', seconds: 30 * 86_400 },
  { label: '1 year', seconds: 31_536_000 },
];

export function KeysPage() {
  const can = useCan();
  const queryClient = useQueryClient();
  const keys = useQuery({ queryKey: KEYS, queryFn: () => api<{ keys: BoundKey[] }>('GET', '/keys') });
  const [creating, setCreating] = useState(false);
  const [revoking, setRevoking] = useState<BoundKey | undefined>();

  return (
    <>
      <p>
        Keys made here have the origin <strong>bound</strong>: each acts for one end-user of your app, with the scopes <code>{BOUND_SCOPES}</code>.
      </p>
      {can('keys', 'POST') ? (
        <button type="button" onClick={() => setCreating(true)}>
          Create key
        </button>
      ) : null}
      <ErrorNote error={keys.error} />
      {keys.data && keys.data.keys.length === 0 ? <p>No key yet.</p> : null}
      {keys.data && keys.data.keys.length > 0 ? (
        <Table caption="API keys" columns={['Name', 'Key id', 'End-user', 'Origin', 'Created', 'Last used', 'Expires', 'Status', ...(can('keys', 'DELETE') ? ['Actions'] : [])]}>
          {keys.data.keys.map((key) => (
            <tr key={key.id}>
              <th scope="row">{key.name || 'Unnamed'}</th>
              <td>
                <code>{key.id}</code>
              </td>
              <td>{key.externalId}</td>
              <td>bound</td>
              <td>
                <When at={key.createdAt} />
              </td>
              <td>
                <When at={key.lastUsedAt} />
              </td>
              <td>
                <When at={key.expiresAt} />
              </td>
              <td>{key.revoked ? 'Revoked' : 'Active'}</td>
              {can('keys', 'DELETE') ? (
                <td>
                  {key.revoked ? null : (
                    <button type="button" className="danger" onClick={() => setRevoking(key)} aria-label={`Revoke ${key.name || key.id}`}>
                      Revoke
                    </button>
                  )}
                </td>
              ) : null}
            </tr>
          ))}
        </Table>
      ) : null}
      <CreateKeyDialog open={creating} onClose={() => setCreating(false)} />
      <ConfirmDialog
        target={revoking}
        title="Revoke this key?"
        action="Revoke"
        describe={(key) => (
          <>
            Calls with <strong>{key.name || key.id}</strong> fail from now on. This cannot be undone.
          </>
        )}
        run={(key) => api<BoundKey>('DELETE', `/keys/${encodeURIComponent(key.id)}`)}
        onDone={() => void queryClient.invalidateQueries({ queryKey: KEYS })}
        onClose={() => setRevoking(undefined)}
      />
    </>
  );
}

function CreateKeyDialog({ open, onClose }: { open: boolean; onClose: () => void }) {
  const queryClient = useQueryClient();
  const [name, setName] = useState('');
  const [externalId, setExternalId] = useState('');
  const [expiry, setExpiry] = useState(0);
  const create = useMutation({
    mutationFn: (body: CreateKeyRequest) => api<CreatedKey>('POST', '/keys', body),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: KEYS }),
  });
  const close = () => {
    // The secret leaves memory with the dialog: it is shown once.
    create.reset();
    setName('');
    setExternalId('');
    setExpiry(0);
    onClose();
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const seconds = EXPIRIES[expiry]?.seconds;
    create.mutate({ externalId, ...(name ? { name } : {}), ...(seconds ? { expiresInSeconds: seconds } : {}) });
  };

  if (create.data) {
    return (
      <Dialog open={open} title="Your new key" onClose={close}>
        <p>Copy it now: this is the only time Herald shows it.</p>
        <label htmlFor="new-key-secret">API key</label>
        <input id="new-key-secret" readOnly autoFocus value={create.data.apiKey} onFocus={(event) => event.currentTarget.select()} />
        <div className="actions">
          <button type="button" onClick={() => void navigator.clipboard?.writeText(create.data.apiKey)}>
            Copy
          </button>
          <button type="button" className="secondary" onClick={close}>
            Done
          </button>
        </div>
      </Dialog>
    );
  }
  return (
    <Dialog open={open} title="Create an API key" onClose={close}>
      <form onSubmit={submit}>
        <label htmlFor="key-name">Name</label>
        <input id="key-name" value={name} onChange={(event) => setName(event.target.value)} />
        <label htmlFor="key-external-id">End-user id</label>
        <input id="key-external-id" required aria-describedby="key-external-id-help" value={externalId} onChange={(event) => setExternalId(event.target.value)} />
        <p id="key-external-id-help" className="help">
          The user of your app this key acts for (their id in your system).
        </p>
        <label htmlFor="key-expiry">Expires after</label>
        <select id="key-expiry" value={expiry} onChange={(event) => setExpiry(Number(event.target.value))}>
          {EXPIRIES.map((choice, index) => (
            <option key={choice.label} value={index}>
              {choice.label}
            </option>
          ))}
        </select>
        <fieldset>
          <legend>Origin and scopes</legend>
          <p>
            bound: <code>{BOUND_SCOPES}</code>
          </p>
        </fieldset>
        <ErrorNote error={create.error} />
        <div className="actions">
          <button type="submit" disabled={create.isPending}>
            Create
          </button>
          <button type="button" className="secondary" onClick={close}>
            Cancel
          </button>
        </div>
      </form>
    </Dialog>
  );
}
