import './styles.css';

import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';

import { ApiError } from './api.js';
import { App, meQuery } from './app.js';
import { prefetchOverview } from './pages/overview.js';
import { BASE } from './router.js';

const queryClient = new QueryClient({
  defaultOptions: {
    // A 4xx will not change by asking again; the page says what went wrong instead.
    // Fresh for 10 s: a page opened right after its data was fetched (or prefetched) does not ask again.
    queries: { staleTime: 10_000, retry: (failures, error) => failures < 2 && !(error instanceof ApiError && error.status < 500) },
  },
});

// Asked for at once, side by side, before the first render: a cold load waits for one round trip.
void queryClient.prefetchQuery(meQuery);
if (window.location.pathname === BASE || window.location.pathname === `${BASE}/`) prefetchOverview(queryClient);

// The installable app: the service worker keeps the shell for offline starts (console/src/sw.ts).
// Registered once the page has loaded, so its install (which fetches the shell again) does not
// compete with the first page's own requests.
if ('serviceWorker' in navigator) {
  window.addEventListener(
    'load',
    () => void navigator.serviceWorker.register(`${BASE}/sw.js`, { scope: `${BASE}/` }).catch((err: unknown) => console.warn('the console works without its service worker', err)),
    { once: true },
  );
}

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root');
createRoot(root).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
