import { createSocket, type RemoteInfo } from 'node:dgram';
import { isIP } from 'node:net';

/**
 * A tiny authoritative DNS server on loopback (UDP, RFC 1035) for names a test controls: what
 * WEBHOOK_DNS_SERVERS points the outbound-webhook resolver at, so that a host name can resolve to a
 * private address without touching /etc/hosts or the network. It answers A and AAAA questions
 * from `zone` (NXDOMAIN for a name not in it, an empty answer for a type the name lacks) and
 * counts anything else (another type, a malformed query) as a violation.
 */
export interface DnsServer {
  /** `127.0.0.1:<port>`, as WEBHOOK_DNS_SERVERS takes it. */
  address: string;
  /** A and AAAA questions asked so far, `<name> <A|AAAA>`, in order, for names in the zone or not. */
  asked: string[];
  /** Protocol violations seen (a malformed query, an unexpected class or opcode). */
  violations: string[];
  close(): Promise<void>;
}

/** A name's addresses; a function gives each question its own answer (the n-th question for the name is `n`, from 1). */
export type DnsAnswer = readonly string[] | ((asked: number) => readonly string[]);

const TYPE_A = 1;
const TYPE_AAAA = 28;
const CLASS_IN = 1;

function readName(message: Buffer, start: number): { name: string; end: number } {
  const labels: string[] = [];
  let offset = start;
  for (;;) {
    const length = message[offset];
    if (length === undefined) throw new Error('the question name runs past the message');
    if (length === 0) return { name: labels.join('.').toLowerCase(), end: offset + 1 };
    // A query's question is never compressed (RFC 1035 section 4.1.4: pointers refer back, and nothing precedes it).
    if (length > 63) throw new Error(`label length ${length} in a question`);
    labels.push(message.toString('latin1', offset + 1, offset + 1 + length));
    offset += 1 + length;
  }
}

function record(type: number, address: string): Buffer {
  const data = type === TYPE_A ? Buffer.from(address.split('.').map(Number)) : ipv6Bytes(address);
  const head = Buffer.alloc(12);
  head.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
  head.writeUInt16BE(type, 2);
  head.writeUInt16BE(CLASS_IN, 4);
  head.writeUInt32BE(0, 6); // TTL 0: every lookup asks again (what a rebinding attacker serves)
  head.writeUInt16BE(data.length, 10);
  return Buffer.concat([head, data]);
}

function ipv6Bytes(address: string): Buffer {
  const [head = '', tail] = address.split('::');
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const missing = 8 - groups(head).length - groups(tail).length;
  const all = [...groups(head), ...(tail === undefined ? [] : Array<string>(missing).fill('0')), ...groups(tail)];
  const bytes = Buffer.alloc(16);
  all.forEach((group, index) => bytes.writeUInt16BE(Number.parseInt(group, 16), index * 2));
  return bytes;
}

export async function startDnsServer(zone: Record<string, DnsAnswer>): Promise<DnsServer> {
  const socket = createSocket('udp4');
  const asked: string[] = [];
  const violations: string[] = [];
  const counts = new Map<string, number>();

  const answer = (query: Buffer, peer: RemoteInfo): void => {
    if (query.length < 12) return void violations.push(`a ${query.length}-byte message`);
    const flags = query.readUInt16BE(2);
    if (flags & 0x8000) return void violations.push('a response sent as a query');
    if ((flags >> 11) & 0xf) return void violations.push(`opcode ${(flags >> 11) & 0xf}`);
    if (query.readUInt16BE(4) !== 1) return void violations.push(`${query.readUInt16BE(4)} questions in one query`);
    let question: { name: string; end: number };
    try {
      question = readName(query, 12);
    } catch (err) {
      return void violations.push((err as Error).message);
    }
    const type = query.readUInt16BE(question.end);
    const klass = query.readUInt16BE(question.end + 2);
    if (klass !== CLASS_IN) return void violations.push(`class ${klass}`);
    const entry = zone[question.name];
    if (type !== TYPE_A && type !== TYPE_AAAA) violations.push(`a type ${type} question for ${question.name}`);
    else asked.push(`${question.name} ${type === TYPE_A ? 'A' : 'AAAA'}`);
    let rcode = 0;
    let records: Buffer[] = [];
    if (entry === undefined) rcode = 3; // NXDOMAIN
    else if (type === TYPE_A || type === TYPE_AAAA) {
      const seen = (counts.get(`${question.name} ${type}`) ?? 0) + 1;
      counts.set(`${question.name} ${type}`, seen);
      const addresses = typeof entry === 'function' ? entry(seen) : entry;
      records = addresses.filter((address) => isIP(address) === (type === TYPE_A ? 4 : 6)).map((address) => record(type, address));
    }
    const header = Buffer.alloc(12);
    header.writeUInt16BE(query.readUInt16BE(0), 0);
    // QR, AA, the query's RD, RA; the response code.
    header.writeUInt16BE(0x8000 | 0x0400 | (flags & 0x0100) | 0x0080 | rcode, 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(records.length, 6);
    socket.send(Buffer.concat([header, query.subarray(12, question.end + 4), ...records]), peer.port, peer.address);
  };

  socket.on('message', answer);
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => resolve());
  });
  return {
    address: `127.0.0.1:${socket.address().port}`,
    asked,
    violations,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}
