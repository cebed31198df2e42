import { readFileSync } from 'node:fs';

import type { Env } from '@herald/config';

import { WEBHOOK_DEFAULTS, type WebhookDispatcherOptions } from './dispatcher.js';

type DispatcherSettings = Pick<WebhookDispatcherOptions, 'allowPrivateAddresses' | 'dnsServers' | 'timeoutMs' | 'maxAttempts' | 'retryBaseMs' | 'retryCapMs'>;

const IP_WITH_PORT = String.raw`(?:\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?|[0-9a-fA-F:]*:[0-9a-fA-F:]*|\[[0-9a-fA-F:]+\](?::\d{1,5})?)`;
const DNS_SERVERS = new RegExp(`^(?:${IP_WITH_PORT}(?:\\s*,\\s*${IP_WITH_PORT})*)?$`);

/** The dispatcher's WEBHOOK_* variables, for the config.ts of a service that sends webhooks: `...webhookSettings(env)`. */
export function webhookSettings(env: Env): { webhooks: DispatcherSettings & { caFile: string | undefined } } {
  return {
    webhooks: {
      /** Lets webhooks reach loopback and private addresses: tests and local receivers only. */
      allowPrivateAddresses: env.boolean('WEBHOOK_ALLOW_PRIVATE_ADDRESSES', false),
      /** DNS servers that alone resolve webhook hosts (A and AAAA, no /etc/hosts); unset: the system's resolver. */
      dnsServers: env
        .matching('WEBHOOK_DNS_SERVERS', DNS_SERVERS, 'a comma-separated list of IP addresses, each with an optional port (1.2.3.4:53, [::1]:53)', '')
        .split(',')
        .map((server) => server.trim())
        .filter((server) => server !== ''),
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
