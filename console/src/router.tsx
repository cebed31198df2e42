import { type AnchorHTMLAttributes, type MouseEvent, useSyncExternalStore } from 'react';

/**
 * The console's router: a handful of flat pages under /console, so the History API and one
 * external store do it (no nested layouts or loaders to justify a router library's bytes).
 */

export const BASE = '/console';

const NAVIGATED = 'herald:navigated';

function subscribe(onChange: () => void): () => void {
  window.addEventListener('popstate', onChange);
  window.addEventListener(NAVIGATED, onChange);
  return () => {
    window.removeEventListener('popstate', onChange);
    window.removeEventListener(NAVIGATED, onChange);
  };
}

/** The page's path below /console, e.g. "/keys" ("/" for the overview). */
export function usePath(): string {
  const pathname = useSyncExternalStore(subscribe, () => window.location.pathname);
  const below = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  return below === '' ? '/' : below.replace(/\/+$/, '') || '/';
}

export function navigate(to: string): void {
  window.history.pushState(null, '', `${BASE}${to}`);
  window.dispatchEvent(new Event(NAVIGATED));
}

type LinkProps = Omit<AnchorHTMLAttributes<HTMLAnchorElement>, 'href'> & { to: string };

/** A real link (it opens in a new tab, it can be copied) that moves within the app on a plain click. */
export function Link({ to, onClick, ...rest }: LinkProps) {
  const path = usePath();
  const handle = (event: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(event);
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(to);
  };
  return <a href={`${BASE}${to}`} aria-current={path === to ? 'page' : undefined} onClick={handle} {...rest} />;
}

/** A query parameter of the page's address (e.g. the campaign a page shows), kept in step with navigation. */
export function useSearchParam(name: string): string | null {
  const search = useSyncExternalStore(subscribe, () => window.location.search);
  return new URLSearchParams(search).get(name);
}
