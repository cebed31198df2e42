/**
 * HPACK (RFC 7541) for the HTTP/2 client: a full decoder for response header blocks and an encoder for
 * request header blocks that never touches the dynamic table.
 *
 * The encoder only emits static-table references and literals "without indexing", never Huffman-coded, so
 * the peer's SETTINGS_HEADER_TABLE_SIZE never matters and no encoder state exists: a request block can be
 * built on any connection, in any order. The cost is a few dozen octets per request over a stateful
 * encoder, which is nothing next to a 4 KiB push body.
 */
import { HpackError, huffmanDecode, latin1 } from './huffman.js';

export { HpackError } from './huffman.js';

/** RFC 7541 Appendix A: the static table, index 1 first. */
const STATIC_TABLE: ReadonlyArray<readonly [name: string, value: string]> = [
  [':authority', ''],
  [':method', 'GET'],
  [':method', 'POST'],
  [':path', '/'],
  [':path', '/index.html'],
  [':scheme', 'http'],
  [':scheme', 'https'],
  [':status', '200'],
  [':status', '204'],
  [':status', '206'],
  [':status', '304'],
  [':status', '400'],
  [':status', '404'],
  [':status', '500'],
  ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'],
  ['accept-language', ''],
  ['accept-ranges', ''],
  ['accept', ''],
  ['access-control-allow-origin', ''],
  ['age', ''],
  ['allow', ''],
  ['authorization', ''],
  ['cache-control', ''],
  ['content-disposition', ''],
  ['content-encoding', ''],
  ['content-language', ''],
  ['content-length', ''],
  ['content-location', ''],
  ['content-range', ''],
  ['content-type', ''],
  ['cookie', ''],
  ['date', ''],
  ['etag', ''],
  ['expect', ''],
  ['expires', ''],
  ['from', ''],
  ['host', ''],
  ['if-match', ''],
  ['if-modified-since', ''],
  ['if-none-match', ''],
  ['if-range', ''],
  ['if-unmodified-since', ''],
  ['last-modified', ''],
  ['link', ''],
  ['location', ''],
  ['max-forwards', ''],
  ['proxy-authenticate', ''],
  ['proxy-authorization', ''],
  ['range', ''],
  ['referer', ''],
  ['refresh', ''],
  ['retry-after', ''],
  ['server', ''],
  ['set-cookie', ''],
  ['strict-transport-security', ''],
  ['transfer-encoding', ''],
  ['user-agent', ''],
  ['vary', ''],
  ['via', ''],
  ['www-authenticate', ''],
];
const STATIC_COUNT = STATIC_TABLE.length;
/** Indexed by HPACK index (slot 0 unused), so the decoder's hot path does no subtraction or tuple access. */
const STATIC_NAMES = ['', ...STATIC_TABLE.map(([name]) => name)];
const STATIC_VALUES = ['', ...STATIC_TABLE.map(([, value]) => value)];

/** Section 4.1: an entry's size is its name and value lengths in octets plus 32. */
const ENTRY_OVERHEAD = 32;
/** The largest integer we accept (section 5.1 sets no limit; anything this large is garbage or an attack). */
const MAX_INTEGER = 0x7fffffff;

/**
 * Decodes header blocks of one connection, in the order they arrive (the dynamic table is shared by all of
 * its streams). Any HpackError leaves the table unusable: the caller must end the connection.
 */
export class HpackDecoder {
  /** The SETTINGS_HEADER_TABLE_SIZE we advertised: the peer's encoder may shrink the table, never exceed this. */
  private readonly maxTableSize: number;
  /** The current maximum size of the dynamic table, as last set by a size update (section 6.3). */
  private capacity: number;
  /** The dynamic table's size in octets (section 4.1). */
  private size = 0;
  /**
   * The dynamic table as a ring: `head` is the slot of the newest entry (dynamic index 1), older entries
   * precede it. At most maxTableSize / 32 entries fit, so a ring of that many slots (rounded up to a power
   * of two, for masking) never overflows.
   */
  private readonly names: string[];
  private readonly values: string[];
  private readonly mask: number;
  private head = 0;
  private count = 0;
  /** Read position in the block being decoded: lets readInteger and readString return just their value. */
  private pos = 0;

  constructor(maxTableSize = 4096) {
    if (!Number.isInteger(maxTableSize) || maxTableSize < 0 || maxTableSize > MAX_INTEGER) {
      throw new RangeError('maxTableSize must be an integer between 0 and 2^31 - 1');
    }
    this.maxTableSize = maxTableSize;
    this.capacity = maxTableSize;
    let slots = 1;
    while (slots < maxTableSize / ENTRY_OVERHEAD) slots *= 2;
    this.mask = slots - 1;
    this.names = new Array<string>(slots).fill('');
    this.values = new Array<string>(slots).fill('');
  }

  /** The dynamic table's current size in octets (section 4.1). */
  get tableSize(): number {
    return this.size;
  }

  /** Decodes one complete header block (HEADERS plus any CONTINUATION payloads, joined). */
  decode(block: Buffer): Array<[string, string]> {
    const fields: Array<[string, string]> = [];
    const end = block.length;
    this.pos = 0;
    while (this.pos < end) {
      const octet = block[this.pos]!;
      if (octet >= 0x80) {
        // Section 6.1: indexed header field, 7-bit index.
        const index = this.readInteger(block, 0x7f);
        if (index <= STATIC_COUNT && index > 0) {
          fields.push([STATIC_NAMES[index]!, STATIC_VALUES[index]!]);
        } else {
          const slot = this.dynamicSlot(index);
          fields.push([this.names[slot]!, this.values[slot]!]);
        }
      } else if (octet >= 0x40) {
        // Section 6.2.1: literal with incremental indexing, 6-bit name index (0: the name follows).
        const index = this.readInteger(block, 0x3f);
        const name = index === 0 ? this.readString(block) : this.nameAt(index);
        const value = this.readString(block);
        this.insert(name, value);
        fields.push([name, value]);
      } else if (octet >= 0x20) {
        // Section 6.3: dynamic table size update, only before the first field (section 4.2).
        if (fields.length !== 0) {
          throw new HpackError('dynamic table size update after a header field (RFC 7541 section 4.2)');
        }
        const size = this.readInteger(block, 0x1f);
        if (size > this.maxTableSize) {
          throw new HpackError(
            `dynamic table size update to ${size} exceeds our limit of ${this.maxTableSize} (RFC 7541 section 6.3)`,
          );
        }
        this.capacity = size;
        this.evictTo(size);
      } else {
        // Sections 6.2.2 and 6.2.3: literal without indexing / never indexed (0000 / 0001), 4-bit name index.
        const index = this.readInteger(block, 0x0f);
        const name = index === 0 ? this.readString(block) : this.nameAt(index);
        fields.push([name, this.readString(block)]);
      }
    }
    return fields;
  }

  /** Section 5.1: an integer with an N-bit prefix (`prefixMask` = 2^N - 1) starting at this.pos. */
  private readInteger(src: Buffer, prefixMask: number): number {
    let pos = this.pos;
    let value = src[pos++]! & prefixMask;
    if (value === prefixMask) {
      // 7 bits per continuation octet: a value below 2^31 needs at most 5 (shifts 0-28), so a 6th is an error.
      for (let shift = 0; ; shift += 7) {
        if (pos === src.length) throw new HpackError('header block ends inside an integer (RFC 7541 section 5.1)');
        const octet = src[pos++]!;
        value += (octet & 0x7f) * 2 ** shift;
        if (value > MAX_INTEGER || shift > 28) throw new HpackError('integer exceeds 2^31 - 1 (RFC 7541 section 5.1)');
        if (octet < 0x80) break;
      }
    }
    this.pos = pos;
    return value;
  }

  /** Section 5.2: a string literal, Huffman-coded or raw octets, at this.pos. */
  private readString(src: Buffer): string {
    if (this.pos === src.length) throw new HpackError('header block ends before a string literal (RFC 7541 section 5.2)');
    const huffman = src[this.pos]! >= 0x80;
    const length = this.readInteger(src, 0x7f);
    const start = this.pos;
    const end = start + length;
    if (end > src.length) {
      throw new HpackError('string literal runs past the end of the header block (RFC 7541 section 5.2)');
    }
    this.pos = end;
    return huffman ? huffmanDecode(src, start, end) : latin1(src, start, end);
  }

  /** Section 2.3.3: index 1-61 is static, 62 and up dynamic (newest first). */
  private nameAt(index: number): string {
    if (index <= STATIC_COUNT && index > 0) return STATIC_NAMES[index]!;
    return this.names[this.dynamicSlot(index)]!;
  }

  private dynamicSlot(index: number): number {
    const age = index - STATIC_COUNT - 1;
    if (age < 0 || age >= this.count) {
      if (index === 0) throw new HpackError('index 0 (RFC 7541 section 6.1)');
      throw new HpackError(
        `index ${index} is not in the static table or the ${this.count}-entry dynamic table (RFC 7541 section 2.3.3)`,
      );
    }
    return (this.head - age) & this.mask;
  }

  /** Section 4.4: evict from the oldest end until the new entry fits; an entry larger than the table empties it. */
  private insert(name: string, value: string): void {
    const entrySize = name.length + value.length + ENTRY_OVERHEAD;
    if (entrySize > this.capacity) {
      this.evictTo(0);
      return;
    }
    this.evictTo(this.capacity - entrySize);
    this.head = (this.head + 1) & this.mask;
    this.names[this.head] = name;
    this.values[this.head] = value;
    this.count++;
    this.size += entrySize;
  }

  /** Section 4.3: evicts the oldest entries until the table's size is at most `limit`. */
  private evictTo(limit: number): void {
    while (this.size > limit) {
      const oldest = (this.head - this.count + 1) & this.mask;
      this.size -= this.names[oldest]!.length + this.values[oldest]!.length + ENTRY_OVERHEAD;
      this.names[oldest] = ''; // let the strings go
      this.values[oldest] = '';
      this.count--;
    }
  }
}

// --- encoder ---------------------------------------------------------------------------------------------

interface StaticName {
  /** The lowest static index with this name, for a literal with an indexed name. */
  readonly index: number;
  /**
   * The static index of each exact field with this name, by value; undefined for names whose one static
   * entry has an empty value. A map per name rather than one keyed by "name\0value": building that key
   * for every field cost more than the rest of encoding.
   */
  readonly values: ReadonlyMap<string, number> | undefined;
}

const STATIC_NAME_INDEX = new Map<string, StaticName>();
for (let index = STATIC_COUNT; index >= 1; index--) {
  const name = STATIC_NAMES[index]!;
  const value = STATIC_VALUES[index]!;
  const values = new Map(STATIC_NAME_INDEX.get(name)?.values);
  if (value !== '') values.set(value, index);
  STATIC_NAME_INDEX.set(name, { index, values: values.size === 0 ? undefined : values });
}

/** Per field, what encodeHeaders' first pass found: > 0 a static field index, < 0 minus a name index, 0 neither. */
let plan = new Int32Array(32);

/** Strings at least this long are copied by Buffer#write; shorter ones by a loop, which skips a native call. */
const NATIVE_COPY_MIN = 48;

/**
 * Encodes a request header block without Huffman coding and without touching the dynamic table: each field
 * is an indexed static field (section 6.1) when the static table holds it exactly, else a literal without
 * indexing (section 6.2.2) with the static name index if there is one, else with a literal name.
 *
 * Names must already be lowercase, and names and values latin1 (in practice ASCII): a character above
 * U+00FF would lose its high bits. Field validity (no CR, LF or NUL) is the caller's to check.
 */
export function encodeHeaders(fields: ReadonlyArray<readonly [string, string]>): Buffer {
  const count = fields.length;
  if (plan.length < count) plan = new Int32Array(count * 2);
  let total = 0;
  for (let i = 0; i < count; i++) {
    const field = fields[i]!;
    const value = field[1];
    const known = STATIC_NAME_INDEX.get(field[0]);
    if (known === undefined) {
      plan[i] = 0;
      total += 1 + stringSize(field[0].length) + stringSize(value.length);
      continue;
    }
    const exact = known.values === undefined ? (value === '' ? known.index : 0) : (known.values.get(value) ?? 0);
    if (exact !== 0) {
      plan[i] = exact;
      total += 1; // every static index fits the 7-bit prefix
    } else {
      plan[i] = -known.index;
      total += integerSize(known.index, 0x0f) + stringSize(value.length);
    }
  }

  const out = Buffer.allocUnsafe(total);
  let pos = 0;
  for (let i = 0; i < count; i++) {
    const step = plan[i]!;
    if (step > 0) {
      out[pos++] = 0x80 | step;
      continue;
    }
    const field = fields[i]!;
    if (step < 0) {
      pos = writeInteger(out, pos, -step, 0x0f, 0x00);
    } else {
      out[pos++] = 0x00;
      pos = writeString(out, pos, field[0]);
    }
    pos = writeString(out, pos, field[1]);
  }
  return out;
}

/** Octets of an integer with the given prefix (section 5.1). */
function integerSize(value: number, prefixMask: number): number {
  if (value < prefixMask) return 1;
  let size = 2;
  for (let rest = value - prefixMask; rest >= 0x80; rest = Math.floor(rest / 0x80)) size++;
  return size;
}

/** Octets of a raw string literal of `length` octets: the 7-bit-prefix length, then the octets. */
function stringSize(length: number): number {
  return integerSize(length, 0x7f) + length;
}

function writeInteger(out: Buffer, pos: number, value: number, prefixMask: number, pattern: number): number {
  if (value < prefixMask) {
    out[pos++] = pattern | value;
    return pos;
  }
  out[pos++] = pattern | prefixMask;
  let rest = value - prefixMask;
  while (rest >= 0x80) {
    out[pos++] = 0x80 | (rest & 0x7f);
    rest = Math.floor(rest / 0x80);
  }
  out[pos++] = rest;
  return pos;
}

/** A raw (H = 0) string literal (section 5.2). */
function writeString(out: Buffer, pos: number, s: string): number {
  const length = s.length;
  pos = writeInteger(out, pos, length, 0x7f, 0x00);
  if (length >= NATIVE_COPY_MIN) return pos + out.write(s, pos, 'latin1');
  for (let i = 0; i < length; i++) out[pos + i] = s.charCodeAt(i);
  return pos + length;
}
