import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { ConnectSlackRequest, Site, SlackConnection, UpdateWorkspaceRequest, WebhookSecret, Workspace } from '@herald/sdk';
import { type FormEvent, useId, useState } from 'react';

import { api, ApiError, fieldProblem } from '../api.js';
import { Link } from '../router.js';
import { useCan } from '../session.js';
import { ConfirmDialog, ErrorNote, When } from '../ui.js';

/**
 * Settings: the site (its keys for the browser SDK) and the approval mode, the channels questions reach people through
 * (web push, Slack, email), the webhook signing secret, and where members are managed. Slack and
 * the signing secret, and changing the approval mode, are the `webhooks` scope: owners and admins
 * (a viewer's call answers 403).
 */

const SITE = ['site'] as const;
const SLACK = ['slack'] as const;
const WORKSPACE = ['workspace'] as const;

export function SettingsPage() {
  return (
    <>
      <SiteSection />
      <ChannelsSection />
      <WebhooksSection />
      <MembersSection />
    </>
  );
}

/** A value to copy (a key): shown read-only, selected on focus, with a Copy button. */
function CopyField({ label, value, help }: { label: string; value: string; help?: string }) {
  const id = useId();
  const [copied, setCopied] = useState(false);
  const copy = () => {
    void navigator.clipboard?.writeText(value).then(() => setCopied(true));
  };
  return (
    <div className="copy-field">
      <label htmlFor={id}>{label}</label>
      <div className="copy-row">
        <input id={id} readOnly value={value} aria-describedby={help ? `${id}-help` : undefined} onFocus={(event) => event.currentTarget.select()} />
        <button type="button" className="secondary" onClick={copy} aria-label={`Copy ${label}`}>
          Copy
        </button>
      </div>
      {help ? (
        <p id={`${id}-help`} className="help">
          {help}
        </p>
      ) : null}
      {copied ? <p role="status">Copied.</p> : null}
    </div>
  );
}

function SiteSection() {
  const site = useQuery({ queryKey: SITE, queryFn: () => api<Site>('GET', '/site') });
  return (
    <section aria-labelledby="site-heading">
      <h2 id="site-heading">Site</h2>
      <ErrorNote error={site.error} />
      {site.data ? (
        <>
          <dl className="details">
            <div>
              <dt>Name</dt>
              <dd>{site.data.name}</dd>
            </div>
            <div>
              <dt>Origin</dt>
              <dd>https://{site.data.domain}</dd>
            </div>
            <div>
              <dt>Slug</dt>
              <dd>
                <code>{site.data.slug}</code>
              </dd>
            </div>
            <div>
              <dt>Subscribe page</dt>
              <dd>
                <a href={site.data.subscribePageUrl}>{site.data.subscribePageUrl}</a>
              </dd>
            </div>
            <div>
              <dt>Created</dt>
              <dd>
                <When at={site.data.createdAt} />
              </dd>
            </div>
          </dl>
          <CopyField label="Site key" value={site.data.siteKey} help="Public: the browser SDK names the site with it." />
          <CopyField label="VAPID public key" value={site.data.vapidPublicKey} help="Public, base64url: the applicationServerKey a browser subscribes with." />
        </>
      ) : null}
      <ApprovalMode />
    </section>
  );
}

const APPROVAL_MODES: Array<{ mode: Workspace['approvalMode']; label: string; help: string }> = [
  { mode: 'browser', label: 'Browser', help: "A question is pushed to its approvers' browsers and devices, and to Slack and email." },
  { mode: 'terminal', label: 'Terminal', help: 'A question is stored and nothing is pushed: the person answers at its link (liveUrl).' },
];

function ApprovalMode() {
  const can = useCan();
  const queryClient = useQueryClient();
  const workspace = useQuery({ queryKey: WORKSPACE, queryFn: () => api<Workspace>('GET', '/workspace') });
  const [chosen, setChosen] = useState<Workspace['approvalMode'] | undefined>();
  const save = useMutation({
    mutationFn: (body: UpdateWorkspaceRequest) => api<Workspace>('PATCH', '/workspace', body),
    onSuccess: (updated) => {
      queryClient.setQueryData(WORKSPACE, updated);
      setChosen(undefined);
    },
  });
  if (!workspace.data) return <ErrorNote error={workspace.error} />;
  const current = workspace.data.approvalMode;
  if (!can('webhooks', 'POST')) {
    return (
      <p>
        Approval mode: <strong>{APPROVAL_MODES.find((entry) => entry.mode === current)?.label ?? current}</strong>. Owners and admins change it.
      </p>
    );
  }
  const selected = chosen ?? current;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate({ approvalMode: selected });
  };
  return (
    <form onSubmit={submit}>
      <fieldset>
        <legend>Approval mode</legend>
        {APPROVAL_MODES.map((entry) => (
          <div key={entry.mode} className="choice">
            <input
              type="radio"
              id={`approval-mode-${entry.mode}`}
              name="approval-mode"
              value={entry.mode}
              checked={selected === entry.mode}
              aria-describedby={`approval-mode-${entry.mode}-help`}
              onChange={() => setChosen(entry.mode)}
            />
            <label htmlFor={`approval-mode-${entry.mode}`}>{entry.label}</label>
            <p id={`approval-mode-${entry.mode}-help`} className="help">
              {entry.help}
            </p>
          </div>
        ))}
      </fieldset>
      <ErrorNote error={save.error} />
      {save.isSuccess ? <p role="status">Saved: questions opened from now on use the {save.data.approvalMode} mode.</p> : null}
      <button type="submit" disabled={save.isPending || selected === current}>
        Save the approval mode
      </button>
    </form>
  );
}

function ChannelsSection() {
  const can = useCan();
  return (
    <section aria-labelledby="channels-heading">
      <h2 id="channels-heading">Channels</h2>
      <p>
        <strong>Web push</strong> reaches the browsers subscribed to the site, signed with the VAPID key above.
      </p>
      <h3>Slack</h3>
      {can('webhooks', 'GET') ? <SlackSettings /> : <p>Only owners and admins see and change the Slack connection.</p>}
      <h3>Email</h3>
      <p>
        Questions naming an email approver are mailed through the server&apos;s SMTP settings (<code>SMTP_URL</code>, <code>MAIL_FROM</code>), set where Herald is
        deployed, not here; the API does not say whether they are set. See the <a href="/docs/email">email documentation</a>.
      </p>
    </section>
  );
}

function SlackSettings() {
  const can = useCan();
  const queryClient = useQueryClient();
  const [disconnecting, setDisconnecting] = useState<SlackConnection | undefined>();
  const connection = useQuery({
    queryKey: SLACK,
    queryFn: () =>
      api<SlackConnection>('GET', '/channels/slack').catch((error: unknown) => {
        // 404: no connection yet.
        if (error instanceof ApiError && error.status === 404) return null;
        throw error;
      }),
  });
  if (connection.error) return <ErrorNote error={connection.error} />;
  if (connection.data === undefined) return <p role="status">Loading…</p>;
  if (connection.data === null) {
    return (
      <>
        <p>Slack is not connected.</p>
        {can('webhooks', 'POST') ? <ConnectSlackForm onConnected={(connected) => queryClient.setQueryData(SLACK, connected)} /> : null}
      </>
    );
  }
  const slack = connection.data;
  return (
    <>
      <dl className="details" aria-label="Slack connection">
        <div>
          <dt>Team</dt>
          <dd>
            {slack.teamName} (<code>{slack.teamId}</code>)
          </dd>
        </div>
        <div>
          <dt>Default channel</dt>
          <dd>
            <code>{slack.defaultChannel}</code>
          </dd>
        </div>
        <div>
          <dt>Bot user</dt>
          <dd>
            <code>{slack.botUserId}</code>
          </dd>
        </div>
        <div>
          <dt>Connected</dt>
          <dd>
            <When at={slack.connectedAt} />
          </dd>
        </div>
      </dl>
      {can('webhooks', 'DELETE') ? (
        <button type="button" className="danger" onClick={() => setDisconnecting(slack)}>
          Disconnect Slack
        </button>
      ) : null}
      <ConfirmDialog
        target={disconnecting}
        title="Disconnect Slack?"
        action="Disconnect"
        describe={(target) => (
          <>
            Questions are no longer posted to <strong>{target.teamName}</strong>; its bot token and signing secret are deleted.
          </>
        )}
        run={() => api<null>('DELETE', '/channels/slack')}
        onDone={() => queryClient.setQueryData(SLACK, null)}
        onClose={() => setDisconnecting(undefined)}
      />
    </>
  );
}

const SLACK_FIELDS: Array<{ name: keyof ConnectSlackRequest; label: string; secret: boolean; help: string }> = [
  { name: 'botToken', label: 'Bot token', secret: true, help: "The app's Bot User OAuth Token (xoxb-…), from its OAuth & Permissions page. Write-only: never shown again." },
  { name: 'signingSecret', label: 'Signing secret', secret: true, help: "From the app's Basic Information page: verifies Slack's button clicks. Write-only: never shown again." },
  { name: 'defaultChannel', label: 'Default channel id', secret: false, help: 'The channel (C…) questions are posted to; invite the app to it first.' },
];

function ConnectSlackForm({ onConnected }: { onConnected: (connection: SlackConnection) => void }) {
  const [values, setValues] = useState<ConnectSlackRequest>({ botToken: '', signingSecret: '', defaultChannel: '' });
  const connect = useMutation({
    mutationFn: (body: ConnectSlackRequest) => api<SlackConnection>('PUT', '/channels/slack', body),
    onSuccess: (connection) => {
      // The secrets leave memory: they are write-only.
      setValues({ botToken: '', signingSecret: '', defaultChannel: '' });
      onConnected(connection);
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    connect.mutate(values);
  };
  return (
    // The API checks the values (and the token with Slack): its problems show next to their fields.
    <form className="inline" onSubmit={submit} noValidate aria-labelledby="slack-connect-heading">
      <h4 id="slack-connect-heading">Connect a Slack app</h4>
      <div className="fields">
        {SLACK_FIELDS.map((field) => {
          const problem = fieldProblem(connect.error, field.name);
          const id = `slack-${field.name}`;
          return (
            <div key={field.name}>
              <label htmlFor={id}>{field.label}</label>
              <input
                id={id}
                type={field.secret ? 'password' : 'text'}
                autoComplete="off"
                required
                value={values[field.name]}
                aria-invalid={problem ? true : undefined}
                aria-describedby={`${id}-help${problem ? ` ${id}-problem` : ''}`}
                onChange={(event) => setValues({ ...values, [field.name]: event.target.value })}
              />
              <p id={`${id}-help`} className="help">
                {field.help}
              </p>
              {problem ? (
                <p id={`${id}-problem`} className="error">
                  {field.label}: {problem}
                </p>
              ) : null}
            </div>
          );
        })}
      </div>
      <ErrorNote error={connect.error} />
      <button type="submit" disabled={connect.isPending}>
        Connect Slack
      </button>
    </form>
  );
}

function WebhooksSection() {
  const can = useCan();
  return (
    <section aria-labelledby="webhooks-heading">
      <h2 id="webhooks-heading">Webhooks</h2>
      <p>
        Herald posts a question&apos;s answer to the <code>callbackUrl</code> given with it (HTTPS on a public address: the API refuses others), signed per Standard Webhooks with
        the workspace&apos;s signing secret. See the <a href="/docs/webhooks">webhooks documentation</a>.
      </p>
      {can('webhooks', 'GET') ? <SigningSecret /> : <p>Only owners and admins see and rotate the signing secret.</p>}
    </section>
  );
}

function SigningSecret() {
  const can = useCan();
  const [rotating, setRotating] = useState<true | undefined>();
  // Read on demand, and forgotten on Hide: the secret is on screen only when asked for.
  const reveal = useMutation({ mutationFn: () => api<WebhookSecret>('GET', '/webhooks/secret') });
  const [rotated, setRotated] = useState<WebhookSecret | undefined>();
  const shown = rotated ?? reveal.data;
  return (
    <>
      {shown ? (
        <>
          <CopyField label="Webhook signing secret" value={shown.secret} help="Verify each webhook's webhook-signature with it; keep it on your server." />
          <p>
            Made <When at={shown.createdAt} />.
            {shown.previousSecretExpiresAt ? (
              <>
                {' '}
                The previous secret still signs until <When at={shown.previousSecretExpiresAt} />.
              </>
            ) : null}
          </p>
        </>
      ) : null}
      <ErrorNote error={reveal.error} />
      <div className="actions">
        {shown ? (
          <button
            type="button"
            className="secondary"
            onClick={() => {
              reveal.reset();
              setRotated(undefined);
            }}
          >
            Hide the signing secret
          </button>
        ) : (
          <button type="button" className="secondary" disabled={reveal.isPending} onClick={() => reveal.mutate()}>
            Show the signing secret
          </button>
        )}
        {can('webhooks', 'POST') ? (
          <button type="button" className="danger" onClick={() => setRotating(true)}>
            Rotate the signing secret
          </button>
        ) : null}
      </div>
      <ConfirmDialog
        target={rotating}
        title="Rotate the signing secret?"
        action="Rotate"
        describe={() => <>A new secret signs from now on; the current one also signs for 24 hours more, while your receivers switch.</>}
        run={() => api<WebhookSecret>('POST', '/webhooks/secret/rotate').then(setRotated)}
        onDone={() => undefined}
        onClose={() => setRotating(undefined)}
      />
    </>
  );
}

function MembersSection() {
  const can = useCan();
  return (
    <section aria-labelledby="members-heading">
      <h2 id="members-heading">Members</h2>
      {can('members', 'GET') ? (
        <p>
          Invite members with a role and remove them on the <Link to="/members">Members</Link> page.
        </p>
      ) : (
        <p>Owners and admins invite and remove members.</p>
      )}
    </section>
  );
}
