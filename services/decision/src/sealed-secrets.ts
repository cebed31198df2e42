import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

import { HeraldError } from '@herald/errors';

/**
 * Secrets of the workspaces' channels (a Slack bot token and signing secret), sealed at rest with
 * AES-256-GCM under a key of CHANNEL_SECRET_KEYS ("kid1:<base64 of 32 bytes>,kid0:<...>"). The
 * first key seals; any listed key opens, by the key id each sealed value carries
 * ("<kid>:<base64 of iv | ciphertext | tag>"), so a key is rotated by putting a new one first and
 * dropping the old one once every value was sealed again (reconnecting re-seals).
 */

/** CHANNEL_SECRET_KEYS as configuration accepts it: empty (no channel secrets), or key ids with 32-byte base64 keys. */
export const CHANNEL_SECRET_KEYS_PATTERN = /^(|[A-Za-z0-9_-]{1,32}:[A-Za-z0-9+/]{43}=(,[A-Za-z0-9_-]{1,32}:[A-Za-z0-9+/]{43}=)*)$/;

const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SecretBox {
  private readonly keys: Map<string, Buffer>;
  private readonly current: string | undefined;

  /** `config`: CHANNEL_SECRET_KEYS, already checked against CHANNEL_SECRET_KEYS_PATTERN. */
  constructor(config: string) {
    const entries = config === '' ? [] : config.split(',').map((entry): [string, Buffer] => {
      const [kid = '', key = ''] = entry.split(':');
      return [kid, Buffer.from(key, 'base64')];
    });
    this.keys = new Map(entries);
    this.current = entries[0]?.[0];
  }

  /** Seals a secret with the first key; a service without keys stores no channel secret. */
  seal(secret: string): string {
    const key = this.current === undefined ? undefined : this.keys.get(this.current);
    if (this.current === undefined || key === undefined) {
      throw new HeraldError('unavailable', 'Channel secrets cannot be stored: the decision service has no CHANNEL_SECRET_KEYS.', {
        title: 'Not configured',
        hint: 'Set CHANNEL_SECRET_KEYS on the decision service (see docs/slack.md).',
      });
    }
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(this.current));
    const sealed = Buffer.concat([iv, cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${this.current}:${sealed.toString('base64')}`;
  }

  /** Opens a sealed secret; throws when its key is no longer configured or it was altered. */
  open(sealed: string): string {
    const separator = sealed.indexOf(':');
    const kid = sealed.slice(0, separator);
    const key = this.keys.get(kid);
    if (separator < 1 || key === undefined) throw new Error(`a channel secret is sealed with the key "${kid}", which CHANNEL_SECRET_KEYS no longer lists`);
    const bytes = Buffer.from(sealed.slice(separator + 1), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(kid));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  }
}
