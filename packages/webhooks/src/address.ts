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
  ['64:ff9b:1::', 48, 'reserved'], // local-use NAT64 (RFC 8215): its IPv4 lies where the operator chose
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

/** The eight 16-bit groups of a canonical IPv6 address. */
function hextets(canonical: string): number[] {
  const [head = '', tail] = canonical.split('::');
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((group) => Number.parseInt(group, 16)));
  const left = groups(head);
  if (tail === undefined) return left;
  const right = groups(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

const dotted = (high: number, low: number): string => [high >> 8, high & 255, low >> 8, low & 255].join('.');

/**
 * The IPv4 addresses an IPv6 address reaches through a transition mechanism: IPv4-mapped
 * (::ffff:0:0/96), IPv4-translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96), 6to4 (2002::/16, the
 * IPv4 in bits 16-47) and Teredo (2001::/32: its server, and its client, stored inverted in the
 * last 32 bits). IPv4-compatible addresses (::/96) are refused whole.
 */
function embeddedIPv4(ipv6: string): string[] {
  const [a = 0, b = 0, c = 0, d = 0, e = 0, f = 0, g = 0, h = 0] = hextets(ipv6);
  const first96 = [a, b, c, d, e, f].join(':');
  if (first96 === '0:0:0:0:0:65535' || first96 === '0:0:0:0:65535:0' || first96 === '100:65435:0:0:0:0') return [dotted(g, h)];
  if (a === 0x2002) return [dotted(b, c)];
  if (a === 0x2001 && b === 0) return [dotted(c, d), dotted(g ^ 0xffff, h ^ 0xffff)];
  return [];
}

const networkOf = (address: string, family: 'ipv4' | 'ipv6'): string | undefined =>
  networks.find(({ list, family: of }) => of === family && list.check(address, family))?.kind;

/**
 * The kind of network (private, loopback, link-local, CGNAT, multicast, ...) of an address a
 * webhook must never reach, directly or through an IPv4 address it embeds; undefined for a public one.
 */
function forbiddenNetwork(address: string): string | undefined {
  if (isIP(address) !== 6) return networkOf(address, 'ipv4');
  const ipv6 = canonicalIPv6(address);
  return networkOf(ipv6, 'ipv6') ?? embeddedIPv4(ipv6).map((ipv4) => networkOf(ipv4, 'ipv4')).find((kind) => kind !== undefined);
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
