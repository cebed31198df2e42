import { lookup, Resolver } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

import { HeraldError, invalidFields } from '@herald/errors';

/**
 * Where a webhook may go: https only, no credentials, at most 2,048 characters, and every address
 * its host resolves to public. The dispatcher resolves and checks the host again at every attempt
 * and connects to the address checked (see send.ts), so a DNS answer that changes after the URL
 * was accepted (DNS rebinding), or between the check and the connection, cannot reach a private
 * one. Redirects are never followed (a 3xx is a failed attempt).
 */

const MAX_WEBHOOK_URL_LENGTH = 2_048;

/** Networks a webhook must never reach, each with the word a refusal uses for it. */
const ipv4Ranges: Array<[string, number, string]> = [
  ['0.0.0.0', 8, 'unspecified'], // "this network"
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'CGNAT'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'], // cloud metadata services live here
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'], // IETF protocol assignments
  ['192.0.2.0', 24, 'documentation'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'reserved'], // benchmarking
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'], // and broadcast
];
const ipv6Ranges: Array<[string, number, string]> = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['::', 96, 'reserved'], // the deprecated IPv4-compatible addresses
  ['100::', 64, 'reserved'], // discard
  ['2001:db8::', 32, 'documentation'],
  ['fc00::', 7, 'private'], // unique-local
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'private'], // site-local (deprecated)
  ['ff00::', 8, 'multicast'],
];
/** Most specific first, so ::1 is loopback rather than within ::/96. */
const networks = [
  ...ipv4Ranges.map(([network, prefix, kind]) => ({ network, prefix, kind, family: 'ipv4' as const })),
  ...ipv6Ranges.map(([network, prefix, kind]) => ({ network, prefix, kind, family: 'ipv6' as const })),
]
  .sort((a, b) => b.prefix - a.prefix)
  .map(({ network, prefix, kind, family }) => {
    const list = new BlockList();
    list.addSubnet(network, prefix, family);
    return { list, kind, family };
  });

/** An IPv6 address in its canonical compressed form (URL serialisation does that, dotted tails included). */
const canonicalIPv6 = (address: string): string => new URL(`https://[${address}]`).hostname.slice(1, -1);

/** IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) addresses reach the IPv4 address inside. */
function embeddedIPv4(ipv6: string): string | undefined {
  const match = /^(?:::ffff|64:ff9b:):([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(ipv6);
  if (!match) return undefined;
  const high = Number.parseInt(match[1] as string, 16);
  const low = Number.parseInt(match[2] as string, 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}

/** The kind of network (private, loopback, link-local, CGNAT, multicast, ...) of an address a webhook must never reach; undefined for a public one. */
function forbiddenNetwork(address: string): string | undefined {
  let checked = address;
  let family: 'ipv4' | 'ipv6' = 'ipv4';
  if (isIP(address) === 6) {
    const ipv6 = canonicalIPv6(address);
    const ipv4 = embeddedIPv4(ipv6);
    [checked, family] = ipv4 !== undefined ? [ipv4, 'ipv4'] : [ipv6, 'ipv6'];
  }
  return networks.find(({ list, family: of }) => of === family && list.check(checked, family))?.kind;
}

/**
 * A URL a webhook must not be posted to: a 400 naming `field` where the URL is given, and at send
 * time `reason`, what the delivery's attempt records ("refused: <reason>").
 */
export class WebhookUrlRefused extends HeraldError {
  constructor(
    field: string,
    problem: string,
    readonly reason: string,
  ) {
    const { message, title, extra } = invalidFields('body', [{ field, in: 'body', problem }]);
    super('invalid_request', message, { title, extra });
    this.name = 'WebhookUrlRefused';
  }
}

export interface WebhookTarget {
  url: URL;
  /** The URL's host without IPv6 brackets: the TLS server name and certificate identity. */
  hostname: string;
  /** The checked address the connection must go to. */
  address: string;
  family: 4 | 6;
}

export interface AddressOptions {
  /** Lets loopback and private addresses through (tests, local receivers); never in production. */
  allowPrivateAddresses: boolean;
  /**
   * DNS servers (`address` or `address:port`) to resolve host names with, A and AAAA queries only,
   * in place of the system's resolver (which also reads /etc/hosts): WEBHOOK_DNS_SERVERS.
   */
  dnsServers?: readonly string[];
}

/** RFC 6761: `localhost` and every name under it are loopback, whatever a resolver would answer. */
const LOOPBACK_NAME = /(^|\.)localhost\.?$/i;
const LOOPBACK = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

/** A and AAAA answers of `servers` for `hostname`; rejects with ENOTFOUND when there are none. */
async function resolveWith(servers: readonly string[], hostname: string): Promise<Array<{ address: string; family: number }>> {
  const resolver = new Resolver({ timeout: 2_000, tries: 2 });
  resolver.setServers(servers);
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(hostname), resolver.resolve6(hostname)]);
  const addresses = [...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []), ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : [])];
  if (addresses.length > 0) return addresses;
  // No address: the name does not exist or has none (ENOTFOUND, ENODATA), unless a query failed otherwise.
  const failed = [v4, v6].find((result): result is PromiseRejectedResult => result.status === 'rejected' && !['ENOTFOUND', 'ENODATA'].includes((result.reason as NodeJS.ErrnoException).code ?? ''));
  throw failed ? (failed.reason as Error) : Object.assign(new Error(`${hostname} has no A or AAAA record`), { code: 'ENOTFOUND' });
}

/** Checks `url` as assertWebhookUrl does and returns the address to connect to. */
export async function resolveWebhookTarget(url: string, field: string, { allowPrivateAddresses, dnsServers }: AddressOptions): Promise<WebhookTarget> {
  const refuse = (problem: string, reason: string): WebhookUrlRefused => new WebhookUrlRefused(field, problem, reason);
  if (url.length > MAX_WEBHOOK_URL_LENGTH) throw refuse(`must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`, `the URL is longer than ${MAX_WEBHOOK_URL_LENGTH} characters`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw refuse('must be an absolute https URL', 'the URL is not an absolute https URL');
  }
  if (parsed.protocol !== 'https:') throw refuse('must use https', 'the URL does not use https');
  if (parsed.username !== '' || parsed.password !== '') throw refuse('must not contain credentials', 'the URL contains credentials');
  const hostname = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  const unresolved = (): WebhookUrlRefused => refuse(`has a host (${hostname}) that does not resolve`, `the host ${hostname} does not resolve`);
  let addresses: Array<{ address: string; family: number }>;
  if (isIP(hostname) !== 0) addresses = [{ address: hostname, family: isIP(hostname) }];
  else if (LOOPBACK_NAME.test(hostname)) addresses = LOOPBACK;
  else {
    try {
      addresses = dnsServers && dnsServers.length > 0 ? await resolveWith(dnsServers, hostname) : await lookup(hostname, { all: true, verbatim: true });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOTFOUND' || code === 'ENODATA') throw unresolved();
      throw new HeraldError('unavailable', `Could not resolve ${hostname}: ${code ?? String(err)}.`);
    }
  }
  // Every address counts: a client may be handed any of them.
  if (!allowPrivateAddresses) {
    for (const { address } of addresses) {
      const network = forbiddenNetwork(address);
      if (network !== undefined) {
        throw refuse(
          'must resolve to public addresses only (not private, loopback, link-local, CGNAT, multicast or unspecified)',
          `the address resolves to ${/^[aeiou]/i.test(network) ? 'an' : 'a'} ${network} network (${address})`,
        );
      }
    }
  }
  const [first] = addresses;
  if (!first) throw unresolved();
  return { url: parsed, hostname, address: first.address, family: first.family === 6 ? 6 : 4 };
}

/**
 * Refuses (400 invalid_request naming `field`) a URL that is not https, has credentials, is over
 * 2,048 characters, or resolves to a private, loopback, link-local, CGNAT, multicast or unspecified
 * IPv4/IPv6 address (IPv4-mapped ones included), unless allowPrivateAddresses.
 */
export async function assertWebhookUrl(url: string, field: string, options: AddressOptions): Promise<void> {
  await resolveWebhookTarget(url, field, options);
}
