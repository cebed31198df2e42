import type { Pool } from '@herald/db';
import { hashSecret, randomId } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type { Logger } from '@herald/logging';
import type {
  DeletePasskeyRequest,
  DeletePasskeyResponse,
  FinishPasskeyRegistrationRequest,
  FinishPasskeyRegistrationResponse,
  FinishPasskeySignInRequest,
  FinishPasskeySignInResponse,
  ListPasskeysRequest,
  ListPasskeysResponse,
  Passkey,
  StartPasskeyRegistrationRequest,
  StartPasskeyRegistrationResponse,
  StartPasskeySignInRequest,
  StartPasskeySignInResponse,
} from '@herald/proto/herald/account/v1/account';
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { decodeClientDataJSON, isoBase64URL } from '@simplewebauthn/server/helpers';

import { newSession, toMemberMessage, type MemberSettings } from './members.js';
import { toIso } from './messages.js';
import * as store from './store.js';

/**
 * Passkeys (WebAuthn, through @simplewebauthn/server): a signed-in member registers them, anyone
 * signs in with one (discoverable credentials: no address asked). The relying party is the
 * gateway's public origin (its host is the RP id), passed on every call. Challenges live in
 * PostgreSQL, hashed, single use, short-lived; a registration challenge belongs to its session.
 * User verification is required on both ceremonies.
 */

export interface PasskeySettings extends MemberSettings {
  passkeyChallengeTtlSeconds: number;
}

const RP_NAME = 'Herald';

/** A member has at most this many passkeys. */
const MAX_PASSKEYS = 20;

function toPasskeyMessage(row: store.PasskeyRow): Passkey {
  return {
    id: row.id,
    name: row.name,
    transports: row.transports,
    deviceType: row.device_type,
    backedUp: row.backed_up,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: toIso(row.last_used_at),
  };
}

/** The relying party: the origin the browser must report, and its host as the RP id. */
function relyingParty(origin: string): { origin: string; rpId: string } {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    throw new Error(`passkey call without a valid origin: "${origin}"`);
  }
  return { origin: url.origin, rpId: url.hostname };
}

const badChallenge = (): HeraldError =>
  new HeraldError('invalid_request', 'The passkey challenge is unknown, used, expired or not this session’s.', {
    title: 'Passkey challenge not usable',
    hint: 'Ask for new options and try again; each challenge works once, for a few minutes.',
  });

const badResponse = (detail: string): HeraldError =>
  new HeraldError('invalid_request', `Malformed passkey response: ${detail}.`, { title: 'Invalid passkey response' });

const refused = (detail: string): HeraldError =>
  new HeraldError('unauthorized', `The passkey was refused: ${detail}.`, { title: 'Passkey refused', hint: 'Try again, or sign in by email link.' });

function parseResponse<T>(json: string): T & { response: { clientDataJSON: string } } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw badResponse('not JSON');
  }
  const clientDataJSON = (parsed as { response?: { clientDataJSON?: unknown } } | null)?.response?.clientDataJSON;
  if (typeof clientDataJSON !== 'string') throw badResponse('no response.clientDataJSON');
  return parsed as T & { response: { clientDataJSON: string } };
}

/** The challenge the browser signed, read from its client data. */
function signedChallenge(clientDataJSON: string): string {
  try {
    const { challenge } = decodeClientDataJSON(clientDataJSON);
    if (typeof challenge !== 'string' || challenge === '') throw new Error('no challenge');
    return challenge;
  } catch {
    throw badResponse('clientDataJSON is not base64url JSON with a challenge');
  }
}

const reason = (err: unknown): string => (err instanceof Error ? err.message.replace(/\.$/, '') : 'verification failed');

/** The user handle of a member's credentials: their member id's bytes (the same on every registration). */
const userHandleOf = (memberId: string): Uint8Array<ArrayBuffer> => new Uint8Array(Buffer.from(memberId, 'utf8'));

export function passkeyHandlers(pool: Pool, logger: Logger, settings: PasskeySettings) {
  const ttlSeconds = settings.passkeyChallengeTtlSeconds;

  async function storeChallenge(challenge: string, purpose: store.ChallengePurpose, sessionHash: Buffer | undefined): Promise<void> {
    await store.createPasskeyChallenge(pool, { hash: hashSecret(challenge), purpose, sessionHash, ttlSeconds });
  }

  return {
    async startPasskeyRegistration({ workspaceId, memberId, sessionId, origin }: StartPasskeyRegistrationRequest): Promise<StartPasskeyRegistrationResponse> {
      const member = await store.findMember(pool, workspaceId, memberId);
      if (!member) throw new HeraldError('not_found', `No member ${memberId} in this workspace.`);
      const existing = await store.listPasskeys(pool, workspaceId, memberId);
      if (existing.length >= MAX_PASSKEYS) {
        throw new HeraldError('conflict', `A member has at most ${MAX_PASSKEYS} passkeys.`, { title: 'Too many passkeys', hint: 'Delete one you no longer use.' });
      }
      const { rpId } = relyingParty(origin);
      const options = await generateRegistrationOptions({
        rpName: RP_NAME,
        rpID: rpId,
        userName: member.email,
        userID: userHandleOf(member.id),
        userDisplayName: member.display_name || member.email,
        timeout: ttlSeconds * 1_000,
        attestationType: 'none',
        // The authenticator refuses to make a second credential for this member.
        excludeCredentials: existing.map((row) => ({ id: row.credential_id, transports: row.transports })),
        authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
      });
      await storeChallenge(options.challenge, 'registration', hashSecret(sessionId));
      return { optionsJson: JSON.stringify(options) };
    },

    async finishPasskeyRegistration({ workspaceId, memberId, sessionId, origin, responseJson, name }: FinishPasskeyRegistrationRequest): Promise<FinishPasskeyRegistrationResponse> {
      const response = parseResponse<RegistrationResponseJSON>(responseJson);
      const challenge = signedChallenge(response.response.clientDataJSON);
      if (!(await store.consumePasskeyChallenge(pool, hashSecret(challenge), 'registration', hashSecret(sessionId)))) throw badChallenge();
      const rp = relyingParty(origin);
      let verification;
      try {
        verification = await verifyRegistrationResponse({ response, expectedChallenge: challenge, expectedOrigin: rp.origin, expectedRPID: rp.rpId, requireUserVerification: true });
      } catch (err) {
        throw refused(reason(err));
      }
      if (!verification.verified) throw refused('the registration could not be verified');
      const { credential, credentialDeviceType, credentialBackedUp } = verification.registrationInfo;
      const row = await store.insertPasskey(pool, {
        id: `psk_${randomId()}`,
        memberId,
        credentialId: credential.id,
        publicKey: Buffer.from(credential.publicKey),
        counter: credential.counter,
        transports: credential.transports ?? [],
        deviceType: credentialDeviceType,
        backedUp: credentialBackedUp,
        name: name.trim() || 'Passkey',
      });
      if (!row) throw new HeraldError('conflict', 'This passkey is registered already.', { title: 'Passkey already registered' });
      logger.info({ workspaceId, memberId, passkeyId: row.id }, 'passkey registered');
      return { passkey: toPasskeyMessage(row) };
    },

    async startPasskeySignIn({ origin }: StartPasskeySignInRequest): Promise<StartPasskeySignInResponse> {
      const options = await generateAuthenticationOptions({ rpID: relyingParty(origin).rpId, userVerification: 'required', timeout: ttlSeconds * 1_000 });
      await storeChallenge(options.challenge, 'sign_in', undefined);
      return { optionsJson: JSON.stringify(options) };
    },

    async finishPasskeySignIn({ origin, responseJson }: FinishPasskeySignInRequest): Promise<FinishPasskeySignInResponse> {
      const response = parseResponse<AuthenticationResponseJSON>(responseJson);
      const challenge = signedChallenge(response.response.clientDataJSON);
      if (!(await store.consumePasskeyChallenge(pool, hashSecret(challenge), 'sign_in', undefined))) throw badChallenge();
      const passkey = typeof response.id === 'string' ? await store.findPasskeyForSignIn(pool, response.id) : undefined;
      if (!passkey) throw refused('this passkey is not registered with Herald');
      const { userHandle } = response.response as { userHandle?: unknown };
      if (userHandle !== undefined && userHandle !== isoBase64URL.fromBuffer(userHandleOf(passkey.member_id))) throw refused('the user handle is not the passkey’s member');
      const rp = relyingParty(origin);
      let verification;
      try {
        verification = await verifyAuthenticationResponse({
          response,
          expectedChallenge: challenge,
          expectedOrigin: rp.origin,
          expectedRPID: rp.rpId,
          credential: {
            id: passkey.credential_id,
            publicKey: new Uint8Array(passkey.public_key),
            counter: Number(passkey.counter),
            transports: passkey.transports,
          },
          requireUserVerification: true,
        });
      } catch (err) {
        throw refused(reason(err));
      }
      if (!verification.verified) throw refused('the signature could not be verified');
      const { sessionId, session } = newSession(settings);
      const outcome = await store.signInWithPasskey(pool, { id: passkey.id, counter: passkey.counter, newCounter: verification.authenticationInfo.newCounter }, session);
      if (outcome?.state !== 'signed_in') throw refused('the passkey was used again meanwhile, or its member was removed');
      return { sessionId, member: toMemberMessage(outcome.member), expiresAt: outcome.expiresAt.toISOString() };
    },

    async listPasskeys({ workspaceId, memberId }: ListPasskeysRequest): Promise<ListPasskeysResponse> {
      return { passkeys: (await store.listPasskeys(pool, workspaceId, memberId)).map(toPasskeyMessage) };
    },

    async deletePasskey({ workspaceId, memberId, passkeyId }: DeletePasskeyRequest): Promise<DeletePasskeyResponse> {
      const row = await store.deletePasskey(pool, workspaceId, memberId, passkeyId);
      if (!row) throw new HeraldError('not_found', `No passkey ${passkeyId} of yours.`, { title: 'Passkey not found' });
      return { passkey: toPasskeyMessage(row) };
    },
  };
}
