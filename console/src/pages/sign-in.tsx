import { useMutation } from '@tanstack/react-query';
import type { SignInLinkRequest } from '@herald/sdk';
import { type FormEvent, useState } from 'react';

import { api } from '../api.js';
import { ErrorNote } from '../ui.js';

/**
 * Signing in. Each way of signing in is one section of the page: today the email link; a passkey
 * and single sign-on (OIDC) take their place beside it.
 */
export function SignInPage() {
  return (
    <main className="centered" id="main">
      <h1>Sign in to Herald</h1>
      <EmailLink />
    </main>
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
