// Draws the extension's icon (images/icon.png, 128x128) from shapes, so no binary is committed:
// two linked rings, a session mentioning another, on a rounded dark square. Run by
// `vscode:prepublish`; 4x4 supersampling gives smooth edges without an image library.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { deflateSync } from 'node:zlib';

const SIZE = 128;
const SAMPLES = 4;
const BACKGROUND = [30, 58, 95];
const RINGS = [
  { cx: 50, cy: 64, r: 26, width: 9, color: [255, 255, 255] },
  { cx: 78, cy: 64, r: 26, width: 9, color: [79, 209, 197] },
];

function insideRoundedSquare(x, y) {
  const radius = 24;
  const dx = Math.max(radius - x, 0, x - (SIZE - radius));
  const dy = Math.max(radius - y, 0, y - (SIZE - radius));
  return dx * dx + dy * dy <= radius * radius;
}

function colourAt(x, y) {
  if (!insideRoundedSquare(x, y)) {
    return null;
  }
  // The teal ring passes over the white one on the right, under it on the left: linked.
  const order = x < 64 ? [RINGS[1], RINGS[0]] : RINGS;
  let colour = BACKGROUND;
  for (const ring of order) {
    const distance = Math.hypot(x - ring.cx, y - ring.cy);
    if (Math.abs(distance - ring.r) <= ring.width / 2) {
      colour = ring.color;
    }
  }
  return colour;
}

const raw = Buffer.alloc(SIZE * (SIZE * 4 + 1));
for (let y = 0; y < SIZE; y++) {
  raw[y * (SIZE * 4 + 1)] = 0; // filter: none
  for (let x = 0; x < SIZE; x++) {
    const sum = [0, 0, 0, 0];
    for (let sy = 0; sy < SAMPLES; sy++) {
      for (let sx = 0; sx < SAMPLES; sx++) {
        const colour = colourAt(x + (sx + 0.5) / SAMPLES, y + (sy + 0.5) / SAMPLES);
        if (colour !== null) {
          sum[0] += colour[0];
          sum[1] += colour[1];
          sum[2] += colour[2];
          sum[3] += 255;
        }
      }
    }
    const covered = sum[3] / 255;
    const offset = y * (SIZE * 4 + 1) + 1 + x * 4;
    for (let channel = 0; channel < 3; channel++) {
      raw[offset + channel] = covered === 0 ? 0 : Math.round(sum[channel] / covered);
    }
    raw[offset + 3] = Math.round(sum[3] / (SAMPLES * SAMPLES));
  }
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) {
    c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  return c >>> 0;
});

function crc32(bytes) {
  let c = 0xffffffff;
  for (const byte of bytes) {
    c = CRC_TABLE[(c ^ byte) & 0xff] ^ (c >>> 8);
  }
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type, data) {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

const header = Buffer.alloc(13);
header.writeUInt32BE(SIZE, 0);
header.writeUInt32BE(SIZE, 4);
header.set([8, 6, 0, 0, 0], 8); // 8-bit RGBA, no interlace
const png = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  chunk('IHDR', header),
  chunk('IDAT', deflateSync(raw, { level: 9 })),
  chunk('IEND', Buffer.alloc(0)),
]);
const out = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'images', 'icon.png');
mkdirSync(path.dirname(out), { recursive: true });
writeFileSync(out, png);
