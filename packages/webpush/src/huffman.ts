/**
 * The HPACK string-literal Huffman code (RFC 7541 Appendix B) and a table-driven decoder for it.
 *
 * The client never Huffman-encodes (see `encodeHeaders`), so only decoding is here. Decoding walks an
 * octet-at-a-time state machine: a state is an internal node of the code tree (256 of them for 257
 * symbols), and one lookup per input octet gives the next state and the symbols completed on the way.
 * The table (256 x 256 entries, 256 KiB) is built once at module load from the code table below, which
 * also checks that the transcription is a complete prefix code.
 */

/**
 * A header block that cannot be decoded: a COMPRESSION_ERROR (RFC 9113 section 4.3), which the caller
 * must turn into a connection error, since the decoder's dynamic table can no longer be trusted.
 * Defined here rather than in hpack.ts so that hpack.ts can import the decoder without an import cycle.
 */
export class HpackError extends Error {
  override readonly name = 'HpackError';
}

/**
 * RFC 7541 Appendix B, symbol by symbol: [code aligned to the least significant bit, length in bits].
 * Symbols 0-255 are octets; 256 is EOS, which must never appear inside a string (section 5.2).
 */
export const HUFFMAN_CODE: ReadonlyArray<readonly [code: number, bits: number]> = [
  [0x1ff8, 13], [0x7fffd8, 23], [0xfffffe2, 28], [0xfffffe3, 28], // 0: 0 1 2 3
  [0xfffffe4, 28], [0xfffffe5, 28], [0xfffffe6, 28], [0xfffffe7, 28], // 4: 4 5 6 7
  [0xfffffe8, 28], [0xffffea, 24], [0x3ffffffc, 30], [0xfffffe9, 28], // 8: 8 9 10 11
  [0xfffffea, 28], [0x3ffffffd, 30], [0xfffffeb, 28], [0xfffffec, 28], // 12: 12 13 14 15
  [0xfffffed, 28], [0xfffffee, 28], [0xfffffef, 28], [0xffffff0, 28], // 16: 16 17 18 19
  [0xffffff1, 28], [0xffffff2, 28], [0x3ffffffe, 30], [0xffffff3, 28], // 20: 20 21 22 23
  [0xffffff4, 28], [0xffffff5, 28], [0xffffff6, 28], [0xffffff7, 28], // 24: 24 25 26 27
  [0xffffff8, 28], [0xffffff9, 28], [0xffffffa, 28], [0xffffffb, 28], // 28: 28 29 30 31
  [0x14, 6], [0x3f8, 10], [0x3f9, 10], [0xffa, 12], // 32: ' ' ! " #
  [0x1ff9, 13], [0x15, 6], [0xf8, 8], [0x7fa, 11], // 36: $ % & '
  [0x3fa, 10], [0x3fb, 10], [0xf9, 8], [0x7fb, 11], // 40: ( ) * +
  [0xfa, 8], [0x16, 6], [0x17, 6], [0x18, 6], // 44: , - . /
  [0x0, 5], [0x1, 5], [0x2, 5], [0x19, 6], // 48: 0 1 2 3
  [0x1a, 6], [0x1b, 6], [0x1c, 6], [0x1d, 6], // 52: 4 5 6 7
  [0x1e, 6], [0x1f, 6], [0x5c, 7], [0xfb, 8], // 56: 8 9 : ;
  [0x7ffc, 15], [0x20, 6], [0xffb, 12], [0x3fc, 10], // 60: < = > ?
  [0x1ffa, 13], [0x21, 6], [0x5d, 7], [0x5e, 7], // 64: @ A B C
  [0x5f, 7], [0x60, 7], [0x61, 7], [0x62, 7], // 68: D E F G
  [0x63, 7], [0x64, 7], [0x65, 7], [0x66, 7], // 72: H I J K
  [0x67, 7], [0x68, 7], [0x69, 7], [0x6a, 7], // 76: L M N O
  [0x6b, 7], [0x6c, 7], [0x6d, 7], [0x6e, 7], // 80: P Q R S
  [0x6f, 7], [0x70, 7], [0x71, 7], [0x72, 7], // 84: T U V W
  [0xfc, 8], [0x73, 7], [0xfd, 8], [0x1ffb, 13], // 88: X Y Z [
  [0x7fff0, 19], [0x1ffc, 13], [0x3ffc, 14], [0x22, 6], // 92: \ ] ^ _
  [0x7ffd, 15], [0x3, 5], [0x23, 6], [0x4, 5], // 96: ` a b c
  [0x24, 6], [0x5, 5], [0x25, 6], [0x26, 6], // 100: d e f g
  [0x27, 6], [0x6, 5], [0x74, 7], [0x75, 7], // 104: h i j k
  [0x28, 6], [0x29, 6], [0x2a, 6], [0x7, 5], // 108: l m n o
  [0x2b, 6], [0x76, 7], [0x2c, 6], [0x8, 5], // 112: p q r s
  [0x9, 5], [0x2d, 6], [0x77, 7], [0x78, 7], // 116: t u v w
  [0x79, 7], [0x7a, 7], [0x7b, 7], [0x7ffe, 15], // 120: x y z {
  [0x7fc, 11], [0x3ffd, 14], [0x1ffd, 13], [0xffffffc, 28], // 124: | } ~ 127
  [0xfffe6, 20], [0x3fffd2, 22], [0xfffe7, 20], [0xfffe8, 20], // 128: 128 129 130 131
  [0x3fffd3, 22], [0x3fffd4, 22], [0x3fffd5, 22], [0x7fffd9, 23], // 132: 132 133 134 135
  [0x3fffd6, 22], [0x7fffda, 23], [0x7fffdb, 23], [0x7fffdc, 23], // 136: 136 137 138 139
  [0x7fffdd, 23], [0x7fffde, 23], [0xffffeb, 24], [0x7fffdf, 23], // 140: 140 141 142 143
  [0xffffec, 24], [0xffffed, 24], [0x3fffd7, 22], [0x7fffe0, 23], // 144: 144 145 146 147
  [0xffffee, 24], [0x7fffe1, 23], [0x7fffe2, 23], [0x7fffe3, 23], // 148: 148 149 150 151
  [0x7fffe4, 23], [0x1fffdc, 21], [0x3fffd8, 22], [0x7fffe5, 23], // 152: 152 153 154 155
  [0x3fffd9, 22], [0x7fffe6, 23], [0x7fffe7, 23], [0xffffef, 24], // 156: 156 157 158 159
  [0x3fffda, 22], [0x1fffdd, 21], [0xfffe9, 20], [0x3fffdb, 22], // 160: 160 161 162 163
  [0x3fffdc, 22], [0x7fffe8, 23], [0x7fffe9, 23], [0x1fffde, 21], // 164: 164 165 166 167
  [0x7fffea, 23], [0x3fffdd, 22], [0x3fffde, 22], [0xfffff0, 24], // 168: 168 169 170 171
  [0x1fffdf, 21], [0x3fffdf, 22], [0x7fffeb, 23], [0x7fffec, 23], // 172: 172 173 174 175
  [0x1fffe0, 21], [0x1fffe1, 21], [0x3fffe0, 22], [0x1fffe2, 21], // 176: 176 177 178 179
  [0x7fffed, 23], [0x3fffe1, 22], [0x7fffee, 23], [0x7fffef, 23], // 180: 180 181 182 183
  [0xfffea, 20], [0x3fffe2, 22], [0x3fffe3, 22], [0x3fffe4, 22], // 184: 184 185 186 187
  [0x7ffff0, 23], [0x3fffe5, 22], [0x3fffe6, 22], [0x7ffff1, 23], // 188: 188 189 190 191
  [0x3ffffe0, 26], [0x3ffffe1, 26], [0xfffeb, 20], [0x7fff1, 19], // 192: 192 193 194 195
  [0x3fffe7, 22], [0x7ffff2, 23], [0x3fffe8, 22], [0x1ffffec, 25], // 196: 196 197 198 199
  [0x3ffffe2, 26], [0x3ffffe3, 26], [0x3ffffe4, 26], [0x7ffffde, 27], // 200: 200 201 202 203
  [0x7ffffdf, 27], [0x3ffffe5, 26], [0xfffff1, 24], [0x1ffffed, 25], // 204: 204 205 206 207
  [0x7fff2, 19], [0x1fffe3, 21], [0x3ffffe6, 26], [0x7ffffe0, 27], // 208: 208 209 210 211
  [0x7ffffe1, 27], [0x3ffffe7, 26], [0x7ffffe2, 27], [0xfffff2, 24], // 212: 212 213 214 215
  [0x1fffe4, 21], [0x1fffe5, 21], [0x3ffffe8, 26], [0x3ffffe9, 26], // 216: 216 217 218 219
  [0xffffffd, 28], [0x7ffffe3, 27], [0x7ffffe4, 27], [0x7ffffe5, 27], // 220: 220 221 222 223
  [0xfffec, 20], [0xfffff3, 24], [0xfffed, 20], [0x1fffe6, 21], // 224: 224 225 226 227
  [0x3fffe9, 22], [0x1fffe7, 21], [0x1fffe8, 21], [0x7ffff3, 23], // 228: 228 229 230 231
  [0x3fffea, 22], [0x3fffeb, 22], [0x1ffffee, 25], [0x1ffffef, 25], // 232: 232 233 234 235
  [0xfffff4, 24], [0xfffff5, 24], [0x3ffffea, 26], [0x7ffff4, 23], // 236: 236 237 238 239
  [0x3ffffeb, 26], [0x7ffffe6, 27], [0x3ffffec, 26], [0x3ffffed, 26], // 240: 240 241 242 243
  [0x7ffffe7, 27], [0x7ffffe8, 27], [0x7ffffe9, 27], [0x7ffffea, 27], // 244: 244 245 246 247
  [0x7ffffeb, 27], [0xffffffe, 28], [0x7ffffec, 27], [0x7ffffed, 27], // 248: 248 249 250 251
  [0x7ffffee, 27], [0x7ffffef, 27], [0x7fffff0, 27], [0x3ffffee, 26], // 252: 252 253 254 255
  [0x3fffffff, 30], // 256: EOS
];

const EOS = 256;
/** Internal nodes of a complete binary tree with 257 leaves; each is a decoder state, the root is 0. */
const STATES = 256;

/**
 * A transition, for one state and one input octet: the next state (bits 0-7), the symbols completed on the
 * way (bits 8-15 and 16-23; at most 2, since no code is shorter than 5 bits), their count (bits 24-25), and
 * flags. The padding flags describe the next state, for a string that ends there (section 5.2): padding
 * must be a prefix of EOS, so all ones, and at most 7 bits long.
 */
const COUNT_SHIFT = 24;
const EOS_SEEN = 1 << 26;
const PAD_TOO_LONG = 1 << 27;
const PAD_NOT_ONES = 1 << 28;

/** TRANSITIONS[state << 8 | octet]. */
const TRANSITIONS = buildTransitions();

function buildTransitions(): Uint32Array {
  // child[node * 2 + bit]: an internal node id (> 0), a leaf as -(symbol + 1), or 0 while unset.
  const child = new Int16Array(STATES * 2);
  // The padding class of each node, from its path from the root.
  const padding = new Uint32Array(STATES);
  let nodes = 1;
  for (let symbol = 0; symbol <= EOS; symbol++) {
    const [code, bits] = HUFFMAN_CODE[symbol]!;
    let node = 0;
    for (let i = bits - 1; i >= 0; i--) {
      const slot = node * 2 + ((code >>> i) & 1);
      const next = child[slot]!;
      if (i === 0) {
        if (next !== 0) throw new Error(`Huffman table: code of symbol ${symbol} is a prefix of another`);
        child[slot] = -(symbol + 1);
      } else if (next < 0) {
        throw new Error(`Huffman table: code of symbol ${-next - 1} is a prefix of symbol ${symbol}'s`);
      } else if (next > 0) {
        node = next;
      } else {
        if (nodes === STATES) throw new Error('Huffman table: more internal nodes than a complete code has');
        const allOnes = padding[node] !== PAD_NOT_ONES && ((code >>> i) & 1) === 1;
        padding[nodes] = !allOnes ? PAD_NOT_ONES : bits - i > 7 ? PAD_TOO_LONG : 0;
        child[slot] = nodes;
        node = nodes++;
      }
    }
  }
  if (nodes !== STATES || child.includes(0)) throw new Error('Huffman table: the code is not complete');

  // First per nibble (at most one symbol each: no code is shorter than 5 bits), then an octet as two nibbles.
  const nibbles = new Int32Array(STATES * 16); // next state | (symbol + 1) << 8, or -1 for EOS
  for (let state = 0; state < STATES; state++) {
    for (let nibble = 0; nibble < 16; nibble++) {
      let node = state;
      let step = 0;
      for (let i = 3; i >= 0 && step >= 0; i--) {
        const next = child[node * 2 + ((nibble >>> i) & 1)]!;
        if (next >= 0) {
          node = next;
        } else if (next === -(EOS + 1)) {
          step = -1;
        } else {
          step = -next << 8;
          node = 0;
        }
      }
      nibbles[(state << 4) | nibble] = step < 0 ? -1 : step | node;
    }
  }
  const transitions = new Uint32Array(STATES * 256);
  for (let state = 0; state < STATES; state++) {
    for (let octet = 0; octet < 256; octet++) {
      const high = nibbles[(state << 4) | (octet >>> 4)]!;
      const low = high < 0 ? -1 : nibbles[((high & 0xff) << 4) | (octet & 0xf)]!;
      if (low < 0) {
        transitions[(state << 8) | octet] = EOS_SEEN;
        continue;
      }
      const node = low & 0xff;
      let entry = node | padding[node]!;
      let count = 0;
      if (high >= 0x100) entry |= ((high >>> 8) - 1) << (8 + 8 * count++);
      if (low >= 0x100) entry |= ((low >>> 8) - 1) << (8 + 8 * count++);
      transitions[(state << 8) | octet] = entry | (count << COUNT_SHIFT);
    }
  }
  return transitions;
}

/** Output scratch, grown on demand: a symbol takes at least 5 bits, so n octets decode to at most 8n/5. */
let scratch = Buffer.allocUnsafe(1024);

/**
 * Decodes the Huffman-coded string in `src[start, end)` to a latin1 string. Throws HpackError on EOS inside
 * the string, padding longer than 7 bits, or padding that is not the most significant bits of EOS (all
 * ones), as RFC 7541 section 5.2 requires.
 */
export function huffmanDecode(src: Buffer, start: number, end: number): string {
  const maxOut = ((end - start) * 8) / 5;
  if (scratch.length < maxOut) scratch = Buffer.allocUnsafe(Math.ceil(maxOut) * 2);
  const out = scratch;
  let n = 0;
  let entry = 0; // the empty string ends at the root, which needs no padding
  for (let i = start; i < end; i++) {
    entry = TRANSITIONS[((entry & 0xff) << 8) | src[i]!]!;
    const count = (entry >>> COUNT_SHIFT) & 3;
    if (count !== 0) {
      out[n++] = (entry >>> 8) & 0xff;
      if (count === 2) out[n++] = (entry >>> 16) & 0xff;
    } else if ((entry & EOS_SEEN) !== 0) {
      throw new HpackError('Huffman string contains the EOS symbol (RFC 7541 section 5.2)');
    }
  }
  if ((entry & (PAD_TOO_LONG | PAD_NOT_ONES)) !== 0) {
    throw new HpackError(
      (entry & PAD_TOO_LONG) !== 0
        ? 'Huffman string padded with more than 7 bits (RFC 7541 section 5.2)'
        : 'Huffman string ends in a partial code that is not EOS padding (RFC 7541 section 5.2)',
    );
  }
  return latin1(out, 0, n);
}

/** Below this length a string is built in JS: Buffer#toString is a native call costing about 60 ns. */
const NATIVE_DECODE_MIN = 12;

/** `src[start, end)` as a latin1 string (shared with hpack.ts for raw string literals). */
export function latin1(src: Buffer, start: number, end: number): string {
  if (end - start >= NATIVE_DECODE_MIN) return src.toString('latin1', start, end);
  let s = '';
  for (let i = start; i < end; i++) s += String.fromCharCode(src[i]!);
  return s;
}
