import { crc32, deflateSync } from 'node:zlib';

/**
 * The app's icons, drawn at build time (no binary in the repository, no image tool): a white "H"
 * on the console's blue, as PNG. The letter keeps inside the middle 60 %, so the same picture is a
 * maskable icon (Android crops up to a circle of 80 %).
 */

const BLUE = [0x0b, 0x57, 0xd0] as const;
const WHITE = [0xff, 0xff, 0xff] as const;

/** Whether (x, y), in 0..1 of the square, is on the letter. */
function onLetter(x: number, y: number): boolean {
  const inRows = y >= 0.28 && y <= 0.72;
  const leftBar = x >= 0.3 && x <= 0.41;
  const rightBar = x >= 0.59 && x <= 0.7;
  const crossBar = x > 0.41 && x < 0.59 && y >= 0.45 && y <= 0.55;
  return inRows && (leftBar || rightBar || crossBar);
}

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const typed = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(typed));
  return Buffer.concat([length, typed, crc]);
}

/** A `size` x `size` PNG (8-bit RGB). */
export function iconPng(size: number): Buffer {
  const rows: Buffer[] = [];
  for (let y = 0; y < size; y += 1) {
    const row = Buffer.alloc(1 + size * 3);
    for (let x = 0; x < size; x += 1) {
      const [r, g, b] = onLetter((x + 0.5) / size, (y + 0.5) / size) ? WHITE : BLUE;
      row.set([r, g, b], 1 + x * 3);
    }
    rows.push(row);
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8 bits per channel, truecolour, deflate, no filter method, no interlace
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', header), chunk('IDAT', deflateSync(Buffer.concat(rows))), chunk('IEND', Buffer.alloc(0))]);
}
