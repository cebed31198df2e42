// The passkey page ({origin}/passkeys): sign in with a passkey, and, signed in, register, list and
// delete one's passkeys. Served as a file (the page's CSP allows no inline script); the WebAuthn
// calls go through @simplewebauthn/browser (/passkeys/webauthn.js, the global SimpleWebAuthnBrowser).
'use strict';
(() => {
  const { browserSupportsWebAuthn, startAuthentication, startRegistration } = window.SimpleWebAuthnBrowser;
  const api = document.body.dataset.api;
  const byId = (id) => document.getElementById(id);
  let me;

  function say(text, isError) {
    const status = byId('status');
    status.textContent = text;
    status.className = isError ? 'error' : '';
  }

  async function call(method, path, body) {
    const headers = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (me && method !== 'GET') headers['x-csrf-token'] = me.csrfToken;
    const response = await fetch(api + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
    const data = await response.json();
    if (!response.ok) throw new Error(data.message || `HTTP ${response.status}`);
    return data;
  }

  function renderPasskeys(passkeys) {
    const list = byId('passkeys');
    list.replaceChildren();
    for (const passkey of passkeys) {
      const item = document.createElement('li');
      const label = document.createElement('span');
      label.textContent = `${passkey.name} (added ${passkey.createdAt.slice(0, 10)}${passkey.lastUsedAt ? `, last used ${passkey.lastUsedAt.slice(0, 10)}` : ''})`;
      const remove = document.createElement('button');
      remove.type = 'button';
      remove.className = 'secondary';
      remove.textContent = `Delete ${passkey.name}`;
      remove.addEventListener('click', () => act(async () => {
        await call('DELETE', `/me/passkeys/${encodeURIComponent(passkey.id)}`);
        await refresh();
        say(`Deleted ${passkey.name}.`);
      }));
      item.append(label, remove);
      list.append(item);
    }
    byId('none').hidden = passkeys.length > 0;
  }

  async function refresh() {
    try {
      me = await call('GET', '/me');
    } catch {
      me = undefined;
    }
    byId('signed-out').hidden = me !== undefined;
    byId('signed-in').hidden = me === undefined;
    if (me) {
      byId('who').textContent = me.member.email;
      renderPasskeys((await call('GET', '/me/passkeys')).passkeys);
    }
  }

  async function act(work) {
    try {
      await work();
    } catch (err) {
      say(err.message || String(err), true);
    }
  }

  byId('sign-in').addEventListener('click', () => act(async () => {
    const { options } = await call('POST', '/sign-in/passkey/options', {});
    const credential = await startAuthentication({ optionsJSON: options });
    await call('POST', '/sign-in/passkey', { credential });
    await refresh();
    say(`Signed in as ${me.member.email}.`);
  }));

  byId('register').addEventListener('click', () => act(async () => {
    const { options } = await call('POST', '/me/passkeys/options', {});
    const credential = await startRegistration({ optionsJSON: options });
    const { passkey } = await call('POST', '/me/passkeys', { name: byId('name').value, credential });
    await refresh();
    say(`Added ${passkey.name}.`);
  }));

  byId('sign-out').addEventListener('click', () => act(async () => {
    await call('DELETE', '/me/session');
    me = undefined;
    await refresh();
    say('Signed out.');
  }));

  if (!browserSupportsWebAuthn()) say('This browser does not support passkeys.', true);
  void refresh().then(() => {
    document.body.dataset.ready = 'true';
  });
})();
