import { useMutation } from '@tanstack/react-query';
import type { SignInLinkRequest } from '@herald/sdk';
import { browserSupportsWebAuthn, type PublicKeyCredentialRequestOptionsJSON, startAuthentication } from '@simplewebauthn/browser';
import { type FormEvent, useState } from 'react';

import { api } from '../api.js';
import { ErrorNote } from '../ui.js';

/**
 * Signing in. Each way of signing in is one section of the page: the email link, a passkey
 * (WebAuthn, @simplewebauthn/browser bundled here: no other origin's script), and single sign-on
 * (the workspace's OpenID provider, through GET /sign-in/sso/{workspaceId}).
 */
export function SignInPage() {
  return (
    <main className="centered" id="main">
      <h1>Sign in to Herald</h1>
      <EmailLink />
      <PasskeySignIn />
      <SsoSignIn />
    </main>
  );
}

/** Where the last SSO sign-in went, so the field is filled the next time on this browser. */
const LAST_WORKSPACE = 'herald:sso-workspace';

/** A discoverable passkey: no address asked; the session cookie is set by POST /sign-in/passkey, then the console loads again. */
function PasskeySignIn() {
  const signIn = useMutation({
    mutationFn: async () => {
      const { options } = await api<{ options: PublicKeyCredentialRequestOptionsJSON }>('POST', '/sign-in/passkey/options', {});
      const credential = await startAuthentication({ optionsJSON: options });
      await api('POST', '/sign-in/passkey', { credential });
    },
    onSuccess: () => window.location.reload(),
  });
  if (!browserSupportsWebAuthn()) return null;
  return (
    <section aria-labelledby="passkey">
      <h2 id="passkey">With a passkey</h2>
      <p className="help">A passkey saved on this device or your phone (add one at /passkeys once signed in).</p>
      <ErrorNote error={signIn.error} />
      <button type="button" className="secondary" disabled={signIn.isPending} onClick={() => signIn.mutate()}>
        Sign in with a passkey
      </button>
    </section>
  );
}

/** Single sign-on: the browser goes to the workspace's provider and comes back signed in. */
function SsoSignIn() {
  const [workspaceId, setWorkspaceId] = useState(() => window.localStorage.getItem(LAST_WORKSPACE) ?? '');
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const id = workspaceId.trim();
    window.localStorage.setItem(LAST_WORKSPACE, id);
    window.location.assign(`/sign-in/sso/${encodeURIComponent(id)}`);
  };
  return (
    <section aria-labelledby="sso">
      <h2 id="sso">With single sign-on</h2>
      <form onSubmit={submit}>
        <label htmlFor="sso-workspace">Workspace id</label>
        <input id="sso-workspace" required maxLength={64} autoComplete="off" aria-describedby="sso-workspace-help" value={workspaceId} onChange={(event) => setWorkspaceId(event.target.value)} />
        <p id="sso-workspace-help" className="help">
          Your workspace's id (ws_…), from an admin; the workspace must have single sign-on set up.
        </p>
        <button type="submit" className="secondary">
          Sign in with SSO
        </button>
      </form>
    </section>
  );
}

function EmailLink() {
  const [email, setEmail] = useState('');
  const request = useMutation({ mutationFn: (body: SignInLinkRequest) => api<{ status: 'accepted'; message: string }>('POST', '/sign-in/links', body) });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    request.mutate({ email });
  };
  if (request.isSuccess) {
    return (
      <section aria-labelledby="check-mail" role="status">
        <h2 id="check-mail">Check your mail</h2>
        <p>
          If <strong>{email}</strong> belongs to a member, a sign-in link is on its way. It works once and for a short time.
        </p>
        <button type="button" className="secondary" onClick={() => request.reset()}>
          Use another address
        </button>
      </section>
    );
  }
  return (
    <section aria-labelledby="email-link">
      <h2 id="email-link">With a link by email</h2>
      <form onSubmit={submit}>
        <label htmlFor="sign-in-email">Email address</label>
        <input id="sign-in-email" type="email" autoComplete="email" required value={email} onChange={(event) => setEmail(event.target.value)} />
        <ErrorNote error={request.error} />
        <button type="submit" disabled={request.isPending}>
          Email me a sign-in link
        </button>
      </form>
    </section>
  );
}
