import { readFileSync } from 'node:fs';

import type { Env } from '@herald/config';

import { WEBHOOK_DEFAULTS, type WebhookDispatcherOptions } from './dispatcher.js';

type DispatcherSettings = Pick<WebhookDispatcherOptions, 'allowPrivateAddresses' | 'timeoutMs' | 'maxAttempts' | 'retryBaseMs' | 'retryCapMs'>;

/** The dispatcher's WEBHOOK_* variables, for the config.ts of a service that sends webhooks: `...webhookSettings(env)`. */
export function webhookSettings(env: Env): { webhooks: DispatcherSettings & { caFile: string | undefined } } {
  return {
    webhooks: {
      /** Lets webhooks reach loopback and private addresses: tests and local receivers only. */
      allowPrivateAddresses: env.boolean('WEBHOOK_ALLOW_PRIVATE_ADDRESSES', false),
      /** A PEM file with an extra CA to trust, e.g. a local receiver's self-signed one. */
      caFile: env.optionalString('WEBHOOK_CA_FILE'),
      timeoutMs: env.integer('WEBHOOK_TIMEOUT_MS', WEBHOOK_DEFAULTS.timeoutMs, { min: 100, max: 60_000 }),
      maxAttempts: env.integer('WEBHOOK_MAX_ATTEMPTS', WEBHOOK_DEFAULTS.maxAttempts, { min: 1, max: 50 }),
      retryBaseMs: env.integer('WEBHOOK_RETRY_BASE_MS', WEBHOOK_DEFAULTS.retryBaseMs, { min: 1, max: 86_400_000 }),
      retryCapMs: env.integer('WEBHOOK_RETRY_CAP_MS', WEBHOOK_DEFAULTS.retryCapMs, { min: 1, max: 7 * 86_400_000 }),
    },
  };
}

/** The options startWebhookDispatcher takes from those settings (reads the CA file). */
export function dispatcherSettings({ caFile, ...settings }: ReturnType<typeof webhookSettings>['webhooks']): DispatcherSettings & { ca?: string } {
  return { ...settings, ...(caFile ? { ca: readFileSync(caFile, 'utf8') } : {}) };
}
