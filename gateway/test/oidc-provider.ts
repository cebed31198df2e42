import { generateKeyPairSync, sign } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

import Provider from 'oidc-provider';

/**
 * A real OpenID provider (the `oidc-provider` package) on loopback for single sign-on tests: its
 * clients registered, its people in a map, and its one interaction (login) answered by a minimal
 * policy of the test's own: whoever `signIn` names is logged in, every scope granted. `tamper`
 * makes it misbehave the way a test needs (an ID token for another audience, from another issuer).
 */

export interface ProviderUser {
  email: string;
  emailVerified: boolean;
  name: string;
}

export interface ProviderClient {
  clientId: string;
  clientSecret: string;
}

export interface OidcPeer {
  issuer: string;
  /** login -> the person; a test adds people as it goes. */
  users: Map<string, ProviderUser>;
  /** Set: the ID tokens the token endpoint answers carry these claims instead (re-signed with the provider's key). */
  tamper: { claims?: Record<string, unknown> };
  /**
   * Follows an authorization URL through the provider as a browser would (its own cookie jar), logs
   * `login` in, and answers the URL the provider sends the browser back to (the redirect URI).
   */
  signIn(authorizationUrl: string, login: string): Promise<URL>;
  stop(): Promise<void>;
}

const base64url = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

export async function startOidcProvider({ redirectUri, clients }: { redirectUri: string; clients: ProviderClient[] }): Promise<OidcPeer> {
  const users = new Map<string, ProviderUser>();
  const tamper: OidcPeer['tamper'] = {};
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-signing-key', alg: 'RS256', use: 'sig' };

  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const provider = new Provider(issuer, {
    clients: clients.map(({ clientId, clientSecret }) => ({
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    })),
    jwks: { keys: [jwk] },
    cookies: { keys: ['sso-test-cookie-key'] },
    pkce: { required: () => true },
    ttl: { AccessToken: 600, AuthorizationCode: 60, Grant: 600, IdToken: 600, Interaction: 600, Session: 600 },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(_ctx, accountId) {
      const user = users.get(accountId);
      if (!user) return undefined;
      return { accountId, claims: () => ({ sub: accountId, email: user.email, email_verified: user.emailVerified, name: user.name }) };
    },
    // First-party clients: every scope they ask for is granted (no consent page).
    async loadExistingGrant(ctx) {
      const { client, session } = ctx.oidc;
      if (!client || !session?.accountId) return undefined;
      const grant = new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId });
      grant.addOIDCScope('openid email profile');
      await grant.save();
      return grant;
    },
  });

  provider.use(async (ctx, next) => {
    await next();
    const body = ctx.body as { id_token?: string } | undefined;
    if (ctx.path !== '/token' || !tamper.claims || typeof body?.id_token !== 'string') return;
    const [header, payload] = body.id_token.split('.') as [string, string];
    const claims = { ...JSON.parse(Buffer.from(payload, 'base64url').toString()), ...tamper.claims };
    const input = `${header}.${base64url(claims)}`;
    ctx.body = { ...body, id_token: `${input}.${sign('sha256', Buffer.from(input), privateKey).toString('base64url')}` };
  });

  const handle = provider.callback();
  server.on('request', (req, res) => {
    const url = new URL(req.url ?? '/', issuer);
    if (!url.pathname.startsWith('/interaction/')) {
      handle(req, res);
      return;
    }
    // The login prompt: the person named by ?login= is who signs in.
    void (async () => {
      const details = await provider.interactionDetails(req, res);
      const login = url.searchParams.get('login');
      if (details.prompt.name !== 'login' || !login || !users.has(login)) {
        res.writeHead(400).end(`unexpected interaction ${details.prompt.name} for ${login}`);
        return;
      }
      await provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
    })().catch((err: unknown) => res.writeHead(500).end(String(err)));
  });

  return {
    issuer,
    users,
    tamper,
    async signIn(authorizationUrl, login) {
      const jar = new Map<string, string>();
      let url = new URL(authorizationUrl);
      for (let hop = 0; hop < 10; hop += 1) {
        if (url.pathname.startsWith('/interaction/')) url.searchParams.set('login', login);
        const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
        const response = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
        for (const line of response.headers.getSetCookie()) {
          const [pair = ''] = line.split(';');
          const at = pair.indexOf('=');
          const name = pair.slice(0, at).trim();
          const value = pair.slice(at + 1).trim();
          if (value === '' || /expires=thu, 01 jan 1970/i.test(line)) jar.delete(name);
          else jar.set(name, value);
        }
        const location = response.headers.get('location');
        if (!location) throw new Error(`${url.pathname} answered ${response.status} without a redirect: ${await response.text()}`);
        const next = new URL(location, url);
        if (next.href.startsWith(`${redirectUri}?`)) return next;
        url = next;
      }
      throw new Error('the provider redirected more than 10 times');
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}
