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

const blocked = new BlockList();
const ipv4Ranges: Array<[string, number]> = [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata services live here)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];
const ipv6Ranges: Array<[string, number]> = [
  ['::', 96], // unspecified, loopback, deprecated IPv4-compatible
  ['64:ff9b:1::', 48], // local-use NAT64 (RFC 8215): its IPv4 lies where the operator chose
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique-local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
];
for (const [network, prefix] of ipv4Ranges) blocked.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of ipv6Ranges) blocked.addSubnet(network, prefix, 'ipv6');

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

/** True for an address a webhook must never reach (private, loopback, link-local, CGNAT, multicast, unspecified…), directly or through an IPv4 it embeds. */
function isForbiddenAddress(address: string): boolean {
  if (isIP(address) === 4) return blocked.check(address, 'ipv4');
  const ipv6 = canonicalIPv6(address);
  return blocked.check(ipv6, 'ipv6') || embeddedIPv4(ipv6).some((ipv4) => blocked.check(ipv4, 'ipv4'));
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
  const refuse = (problem: string): HeraldError => invalidFields('body', [{ field, in: 'body', problem }]);
  if (url.length > MAX_WEBHOOK_URL_LENGTH) throw refuse(`must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw refuse('must be an absolute https URL');
  }
  if (parsed.protocol !== 'https:') throw refuse('must use https');
  if (parsed.username !== '' || parsed.password !== '') throw refuse('must not contain credentials');
  const hostname = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: Array<{ address: string; family: number }>;
  if (isIP(hostname) !== 0) addresses = [{ address: hostname, family: isIP(hostname) }];
  else if (LOOPBACK_NAME.test(hostname)) addresses = LOOPBACK;
  else {
    try {
      addresses = dnsServers && dnsServers.length > 0 ? await resolveWith(dnsServers, hostname) : await lookup(hostname, { all: true, verbatim: true });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOTFOUND' || code === 'ENODATA') throw refuse(`has a host (${hostname}) that does not resolve`);
      throw new HeraldError('unavailable', `Could not resolve ${hostname}: ${code ?? String(err)}.`);
    }
  }
  // Every address counts: a client may be handed any of them.
  if (!allowPrivateAddresses && addresses.some(({ address }) => isForbiddenAddress(address))) {
    throw refuse('must resolve to public addresses only (not private, loopback, link-local, CGNAT, multicast or unspecified)');
  }
  const [first] = addresses;
  if (!first) throw refuse(`has a host (${hostname}) that does not resolve`);
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
