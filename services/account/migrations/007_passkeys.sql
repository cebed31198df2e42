-- Passkeys (WebAuthn credentials) of workspace members. A person who is a member of two
-- workspaces registers one passkey per membership: a credential signs in to its member only.
CREATE TABLE passkeys (
  id            text PRIMARY KEY,
  member_id     text NOT NULL REFERENCES members (id) ON DELETE CASCADE,
  -- The credential id (base64url, as the browser reports it); one member owns a credential.
  credential_id text NOT NULL UNIQUE CHECK (credential_id <> '' AND length(credential_id) <= 1366),
  -- COSE public key.
  public_key    bytea NOT NULL,
  -- The authenticator's signature counter at its last use (0: it does not count).
  counter       bigint NOT NULL DEFAULT 0 CHECK (counter >= 0),
  transports    text[] NOT NULL DEFAULT '{}',
  device_type   text NOT NULL CHECK (device_type IN ('singleDevice', 'multiDevice')),
  backed_up     boolean NOT NULL,
  name          text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz
);
CREATE INDEX passkeys_member ON passkeys (member_id);

-- Challenges handed out for a registration or a sign-in: single use, short-lived. Only SHA-256 of
-- the challenge is stored. A registration challenge belongs to the session that asked for it.
CREATE TABLE passkey_challenges (
  challenge_hash bytea PRIMARY KEY CHECK (octet_length(challenge_hash) = 32),
  purpose        text NOT NULL CHECK (purpose IN ('registration', 'sign_in')),
  session_hash   bytea REFERENCES member_sessions (id_hash) ON DELETE CASCADE,
  CHECK ((purpose = 'registration') = (session_hash IS NOT NULL)),
  created_at     timestamptz NOT NULL DEFAULT now(),
  expires_at     timestamptz NOT NULL,
  used_at        timestamptz
);
CREATE INDEX passkey_challenges_expiry ON passkey_challenges (expires_at);
