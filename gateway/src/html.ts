import type { FastifyInstance, FastifyReply } from 'fastify';

import { escapeHtml } from '@herald/domain';

/** Server-rendered pages. */

/** How every page opens: language, charset, a mobile viewport, not indexed (its URL holds a token). */
export const PAGE_HEAD = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
`;

/** The style of the sign-in pages (email link, single sign-on, passkeys): one centred column, a large primary button. */
export const SIGN_IN_PAGE_STYLE = `  :root { color-scheme: light dark; }
  body { margin: 0; min-height: 100vh; display: grid; place-items: center; padding: 1.25rem; box-sizing: border-box;
         font: 1.0625rem/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
  main { width: 100%; max-width: 28rem; }
  h1 { font-size: 1.5rem; line-height: 1.25; margin: 0 0 .75rem; }
  button { font: inherit; font-weight: 600; min-height: 3rem; padding: .75rem 1rem; border: 0;
           border-radius: .5rem; background: #1f6feb; color: #fff; cursor: pointer; }
  button:focus-visible, input:focus-visible { outline: 3px solid CanvasText; outline-offset: 3px; }`;

export { escapeHtml } from '@herald/domain';

/** Colours are site data: only a plain hex colour reaches a style sheet. */
export const accentColor = (color: string | undefined): string => (color && /^#[0-9a-fA-F]{3,8}$/.test(color) ? color : '#1f6feb');

/**
 * A page whose URL holds a token: nothing caches it, no referrer leaks it, no frame hosts it (CSP).
 * `same-origin` keeps the referrer (and a form post's Origin, which `no-referrer` turns into
 * "null") for this origin alone: for a form whose post is checked to come from this origin.
 */
export function sendTokenPage(reply: FastifyReply, status: number, html: string, contentSecurityPolicy: string, referrerPolicy: 'no-referrer' | 'same-origin' = 'no-referrer'): FastifyReply {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('referrer-policy', referrerPolicy)
    .header('content-security-policy', contentSecurityPolicy)
    .header('x-content-type-options', 'nosniff')
    .send(html);
}

/** Lets the routes of `app` (a plugin) take plain HTML form posts (urlencoded, small). */
export function acceptFormPosts(app: FastifyInstance): void {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 16_384 }, (_request, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });
}

/** A server-rendered page whose only action is a form posting back to this origin (no script). */
export function sendFormPage(reply: FastifyReply, status: number, html: string, referrerPolicy: 'no-referrer' | 'same-origin' = 'no-referrer'): FastifyReply {
  return sendTokenPage(reply, status, html, "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'", referrerPolicy);
}

/** A sign-in page (email link, single sign-on): a heading, a sentence and, while there is one, its button. */
export interface SignInPage {
  heading: string;
  text: string;
  /** Present while the link may be used: the button that posts it. */
  action?: string;
  /** Once signed in: where to go next. */
  next?: { href: string; text: string };
}

export function renderSignInPage({ heading, text, action, next }: SignInPage): string {
  const form = action
    ? `<form method="post" action="${escapeHtml(action)}"><button type="submit">Sign in</button></form>`
    : next
      ? `<p><a href="${escapeHtml(next.href)}">${escapeHtml(next.text)}</a></p>`
      : '';
  return `${PAGE_HEAD}<title>${escapeHtml(heading)} · Herald</title>
<style>
${SIGN_IN_PAGE_STYLE}
  button { width: 100%; }
</style>
</head>
<body>
<main>
  <h1>${escapeHtml(heading)}</h1>
  <p>${escapeHtml(text)}</p>
  ${form}
</main>
</body>
</html>
`;
}
