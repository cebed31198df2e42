import { queryOptions, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { Me } from '@herald/sdk';
import { type ReactNode, useEffect, useRef } from 'react';

import { api, ApiError, describeError, setCsrfToken } from './api.js';
import { InboxPage } from './pages/inbox.js';
import { CampaignsPage } from './pages/campaigns.js';
import { FlowsPage } from './pages/flows.js';
import { KeysPage } from './pages/keys.js';
import { MembersPage } from './pages/members.js';
import { OverviewPage } from './pages/overview.js';
import { PolicyPage } from './pages/policy.js';
import { SegmentsPage } from './pages/segments.js';
import { SettingsPage } from './pages/settings.js';
import { SignInPage } from './pages/sign-in.js';
import { SubscribersPage } from './pages/subscribers.js';
import { TemplatesPage } from './pages/templates.js';
import { Link, navigate, usePath } from './router.js';
import { SessionContext, useCan, useMe } from './session.js';

export const ME = ['me'] as const;
export const meQuery = queryOptions({ queryKey: ME, queryFn: () => api<Me>('GET', '/me') });

export function App() {
  const me = useQuery(meQuery);
  if (me.isPending) return <p className="loading" role="status">Loading…</p>;
  if (me.error) {
    if (me.error instanceof ApiError && me.error.status === 401) return <SignInPage />;
    return (
      <main className="centered">
        <h1>The console cannot reach Herald</h1>
        <p role="alert">{describeError(me.error)}</p>
        <button type="button" onClick={() => void me.refetch()}>
          Try again
        </button>
      </main>
    );
  }
  setCsrfToken(me.data.csrfToken);
  return (
    <SessionContext.Provider value={me.data}>
      <Shell />
    </SessionContext.Provider>
  );
}

interface PageEntry {
  path: string;
  title: string;
  render: () => ReactNode;
  /** Shown in the navigation only when the role may read it. */
  visible: (can: ReturnType<typeof useCan>) => boolean;
}

const PAGES: PageEntry[] = [
  { path: '/', title: 'Overview', render: () => <OverviewPage />, visible: () => true },
  { path: '/inbox', title: 'Decisions', render: () => <InboxPage />, visible: (can) => can('decisions', 'GET') },
  { path: '/subscribers', title: 'Subscribers', render: () => <SubscribersPage />, visible: (can) => can('subscribers', 'GET') },
  { path: '/segments', title: 'Segments', render: () => <SegmentsPage />, visible: (can) => can('subscribers', 'GET') },
  { path: '/campaigns', title: 'Campaigns', render: () => <CampaignsPage />, visible: (can) => can('campaigns', 'GET') },
  { path: '/templates', title: 'Templates', render: () => <TemplatesPage />, visible: (can) => can('templates', 'GET') },
  { path: '/flows', title: 'Flows', render: () => <FlowsPage />, visible: (can) => can('flows', 'GET') },
  { path: '/policy', title: 'Policy', render: () => <PolicyPage />, visible: (can) => can('policy', 'GET') },
  { path: '/keys', title: 'API keys', render: () => <KeysPage />, visible: (can) => can('keys', 'GET') },
  { path: '/members', title: 'Members', render: () => <MembersPage />, visible: (can) => can('members', 'GET') },
  { path: '/settings', title: 'Settings', render: () => <SettingsPage />, visible: (can) => can('account', 'GET') },
];

function Shell() {
  const me = useMe();
  const can = useCan();
  const path = usePath();
  const queryClient = useQueryClient();
  const page = PAGES.find((entry) => entry.path === path);
  const heading = useRef<HTMLHeadingElement>(null);
  const signOut = useMutation({
    mutationFn: (everywhere: boolean) => api<{ revoked: number }>('DELETE', everywhere ? '/me/sessions' : '/me/session'),
    onSuccess: () => {
      navigate('/');
      // Nothing of this member stays in memory; /me, asked again, answers 401: the sign-in page.
      queryClient.removeQueries({ predicate: (query) => query.queryKey[0] !== ME[0] });
      void queryClient.resetQueries({ queryKey: ME });
    },
  });

  useEffect(() => {
    document.title = `${page?.title ?? 'Not found'} · Herald Console`;
    // A page change moves focus to its heading, as a page load would (screen readers announce it).
    heading.current?.focus();
  }, [page]);

  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <span className="brand">Herald</span>
        <span className="workspace">{me.workspace.name}</span>
        <nav aria-label="Console">
          <ul>
            {PAGES.filter((entry) => entry.visible(can)).map((entry) => (
              <li key={entry.path}>
                <Link to={entry.path}>{entry.title}</Link>
              </li>
            ))}
          </ul>
        </nav>
        <div className="account">
          <span>
            {me.member.email} <span className="role">({me.role})</span>
          </span>
          <button type="button" className="secondary" onClick={() => signOut.mutate(false)} disabled={signOut.isPending}>
            Sign out
          </button>
          <button type="button" className="secondary" onClick={() => signOut.mutate(true)} disabled={signOut.isPending}>
            Sign out everywhere
          </button>
        </div>
      </header>
      <main id="main">
        {signOut.error ? <p role="alert">{describeError(signOut.error)}</p> : null}
        <h1 ref={heading} tabIndex={-1}>
          {page?.title ?? 'Page not found'}
        </h1>
        {page ? page.render() : <p>There is no such page. Go to the <Link to="/">overview</Link>.</p>}
      </main>
    </>
  );
}
