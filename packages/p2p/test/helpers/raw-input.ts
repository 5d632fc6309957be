/**
 * Raw bytes on TCP and UDP sockets, for sending listeners what no library would: malformed HTTP, WebSocket
 * frames with reserved bits, lying length fields, garbage datagrams. No client library in between, as an
 * attacker would do it.
 */
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import type { Socket } from 'node:net';

export interface RawConnection {
  socket: Socket;
  /** Everything received so far. */
  received(): Buffer;
  closed(): boolean;
  /** Resolves once the socket is closed, or rejects naming `what` after `ms`. */
  untilClosed(ms: number, what: string): Promise<void>;
}

export async function rawConnect(port: number, host = '127.0.0.1'): Promise<RawConnection> {
  const socket = connect({ port, host });
  const chunks: Buffer[] = [];
  let isClosed = false;
  const closedP = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('data', (d: Buffer) => chunks.push(d));
  // A reset from the far end is one of the answers we expect; it only ends the socket.
  socket.on('error', () => {});
  socket.once('close', () => (isClosed = true));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return {
    socket,
    received: () => Buffer.concat(chunks),
    closed: () => isClosed,
    untilClosed: async (ms, what) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: still open after ${ms} ms`)), ms);
      });
      try {
        await Promise.race([closedP, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

export function upgradeRequest(port: number, path = '/'): string {
  return (
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n'
  );
}

/** The status code of the HTTP response at the start of `bytes`, if a status line has arrived. */
export function httpStatus(bytes: Buffer): number | undefined {
  const m = /^HTTP\/1\.1 (\d{3}) /.exec(bytes.toString('latin1'));
  return m ? Number(m[1]) : undefined;
}

/** The code of the first close frame the server sent after its HTTP response head, if any. */
export function wsCloseCode(bytes: Buffer): number | undefined {
  const headEnd = bytes.indexOf('\r\n\r\n');
  if (headEnd < 0) return undefined;
  let i = headEnd + 4;
  while (i + 2 <= bytes.length) {
    const opcode = bytes[i]! & 0x0f;
    let len = bytes[i + 1]! & 0x7f;
    let off = i + 2;
    if (len === 126) {
      if (off + 2 > bytes.length) return undefined;
      len = bytes.readUInt16BE(off);
      off += 2;
    } else if (len === 127) {
      if (off + 8 > bytes.length) return undefined;
      len = Number(bytes.readBigUInt64BE(off));
      off += 8;
    }
    if (opcode === 0x8) return off + 2 <= bytes.length ? bytes.readUInt16BE(off) : undefined;
    i = off + len;
  }
  return undefined;
}

/**
 * A masked client frame (RFC 6455 §5.2): FIN, `rsv` (3 bits), `opcode`, a payload length field saying
 * `length`, the mask, then `payload` (masked) if given: the length field may lie about what follows.
 */
export function clientFrame(opts: {
  rsv?: number;
  opcode?: number;
  length?: number;
  payload?: Uint8Array;
}): Buffer {
  const payload = Buffer.from(opts.payload ?? new Uint8Array(0));
  const length = opts.length ?? payload.length;
  const first = 0x80 | ((opts.rsv ?? 0) << 4) | (opts.opcode ?? 0x2);
  let head: Buffer;
  if (length < 126) head = Buffer.from([first, 0x80 | length]);
  else if (length < 65536) {
    head = Buffer.from([first, 0x80 | 126, 0, 0]);
    head.writeUInt16BE(length, 2);
  } else {
    head = Buffer.alloc(10);
    head[0] = first;
    head[1] = 0x80 | 127;
    head.writeBigUInt64BE(BigInt(length), 2);
  }
  const mask = Buffer.from([0x11, 0x22, 0x33, 0x44]);
  const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!));
  return Buffer.concat([head, mask, masked]);
}

/** An unsigned varint (multiformats / protobuf length prefix). */
export function varint(n: number | bigint): Buffer {
  let v = BigInt(n);
  const out: number[] = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return Buffer.from(out);
}

/** A multistream-select message: varint length, then the protocol id and a newline. */
export function mss(protocol: string): Buffer {
  const body = Buffer.from(`${protocol}\n`);
  return Buffer.concat([varint(body.length), body]);
}

/** Bytes from a fixed xorshift sequence, so a failure replays the same input. */
export function noise(n: number, seed = 0x9e3779b9): Buffer {
  const out = Buffer.alloc(n);
  let x = seed | 0;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/**
 * A STUN message (RFC 5389): type, a length field that says `declaredLength` (default: the real one), the
 * magic cookie, a transaction id, and the attributes given as [type, value] (padded to 4 bytes).
 */
export function stunMessage(
  type: number,
  attributes: ReadonlyArray<readonly [number, Uint8Array]>,
  declaredLength?: number,
): Buffer {
  const attrs = attributes.map(([t, value]) => {
    const head = Buffer.alloc(4);
    head.writeUInt16BE(t, 0);
    head.writeUInt16BE(value.length, 2);
    const pad = Buffer.alloc((4 - (value.length % 4)) % 4);
    return Buffer.concat([head, Buffer.from(value), pad]);
  });
  const body = Buffer.concat(attrs);
  const header = Buffer.alloc(20);
  header.writeUInt16BE(type, 0);
  header.writeUInt16BE(declaredLength ?? body.length, 2);
  header.writeUInt32BE(0x2112a442, 4);
  noise(12, type * 7919 + body.length).copy(header, 8);
  return Buffer.concat([header, body]);
}

/** Sends each datagram to 127.0.0.1:`port` from one socket. */
export async function sendDatagrams(port: number, datagrams: readonly Uint8Array[]): Promise<void> {
  const socket = createSocket('udp4');
  try {
    for (const d of datagrams) {
      await new Promise<void>((resolve, reject) =>
        socket.send(d, port, '127.0.0.1', (err) => (err ? reject(err) : resolve())),
      );
    }
  } finally {
    socket.close();
  }
}
