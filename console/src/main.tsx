import './styles.css';

import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';

import { ApiError } from './api.js';
import { App } from './app.js';

const queryClient = new QueryClient({
  defaultOptions: {
    // A 4xx will not change by asking again; the page says what went wrong instead.
    queries: { retry: (failures, error) => failures < 2 && !(error instanceof ApiError && error.status < 500) },
  },
});

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root');
createRoot(root).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
