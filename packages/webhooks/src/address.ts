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

/** IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) addresses reach the IPv4 address inside. */
function embeddedIPv4(ipv6: string): string | undefined {
  const match = /^(?:::ffff|64:ff9b:):([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(ipv6);
  if (!match) return undefined;
  const high = Number.parseInt(match[1] as string, 16);
  const low = Number.parseInt(match[2] as string, 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}

/** True for an address a webhook must never reach (private, loopback, link-local, CGNAT, multicast, unspecified…). */
function isForbiddenAddress(address: string): boolean {
  if (isIP(address) === 4) return blocked.check(address, 'ipv4');
  const ipv6 = canonicalIPv6(address);
  const ipv4 = embeddedIPv4(ipv6);
  return ipv4 !== undefined ? blocked.check(ipv4, 'ipv4') : blocked.check(ipv6, 'ipv6');
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
