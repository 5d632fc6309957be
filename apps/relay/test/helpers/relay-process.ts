// The real `meshtrain-relay` bin as a child process, and raw TCP access to its WebSocket endpoints: what an
// operator runs and what an attacker reaches, without any client library in between.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../../bin/meshtrain-relay.mjs', import.meta.url));

export interface RelayProcess {
  child: ChildProcess;
  url: string;
  port: number;
  /** Everything it printed so far (stdout and stderr). */
  out(): string;
  alive(): boolean;
  /** Resident memory in bytes (Linux /proc). */
  rss(): number;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
}

/** Starts `meshtrain-relay run ARGS…` and resolves once it prints its URL. */
export function spawnRelay(args: readonly string[], timeoutMs = 60_000): Promise<RelayProcess> {
  const child = spawn(process.execPath, [BIN, 'run', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const proc = (url: string): RelayProcess => ({
    child,
    url,
    port: Number(new URL(url).port),
    out: () => out,
    alive: () => child.exitCode === null && child.signalCode === null,
    rss: () => {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      return Number(m?.[1] ?? 0) * 1024;
    },
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        child.once('exit', (code) => resolve(code));
        child.kill('SIGTERM');
      }),
  });
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`relay did not start:\n${out}`)), timeoutMs);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/[^\s]+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(proc(m[1]!));
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`relay exited with ${code}:\n${out}`));
    });
  });
}

/** A WebSocket upgrade done by hand on a TCP socket; `status` is the HTTP status the server answered. */
export interface RawUpgrade {
  socket: Socket;
  status: number;
  /** Bytes received after the response head (WebSocket frames). */
  received: Buffer[];
  /** Resolves when the socket closes. */
  closed: Promise<void>;
  /** The close code of the first close frame received, if any. */
  closeCode(): number | undefined;
}

export function rawUpgrade(
  port: number,
  path: string,
  opts: { localAddress?: string; host?: string } = {},
): Promise<RawUpgrade> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: opts.host ?? '127.0.0.1', localAddress: opts.localAddress });
    const received: Buffer[] = [];
    let head = Buffer.alloc(0);
    let done = false;
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.on('error', (e) => {
      if (!done) reject(e);
    });
    socket.on('data', (d: Buffer) => {
      if (done) {
        received.push(d);
        return;
      }
      head = Buffer.concat([head, d]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      done = true;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head.toString('latin1'))?.[1] ?? 0);
      if (head.length > end + 4) received.push(head.subarray(end + 4));
      resolve({
        socket,
        status,
        received,
        closed,
        closeCode: () => {
          const all = Buffer.concat(received);
          for (let i = 0; i + 1 < all.length;) {
            const opcode = all[i]! & 0x0f;
            let len = all[i + 1]! & 0x7f;
            let off = i + 2;
            if (len === 126) {
              len = all.readUInt16BE(off);
              off += 2;
            } else if (len === 127) {
              len = Number(all.readBigUInt64BE(off));
              off += 8;
            }
            if (opcode === 0x8) return off + 2 <= all.length ? all.readUInt16BE(off) : undefined;
            i = off + len;
          }
          return undefined;
        },
      });
    });
    socket.once('connect', () =>
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
      ),
    );
  });
}

/**
 * The head of a masked client frame (RFC 6455 §5.2): FIN, the given RSV bits and opcode, and `length` as
 * the declared payload length, followed by the 4-byte mask. The payload is the caller's to send (or not).
 */
export function frameHead(opts: { opcode?: number; rsv?: number; length: number }): Buffer {
  const first = 0x80 | ((opts.rsv ?? 0) << 4) | (opts.opcode ?? 0x2);
  const mask = Buffer.from([1, 2, 3, 4]);
  if (opts.length < 126) return Buffer.concat([Buffer.from([first, 0x80 | opts.length]), mask]);
  if (opts.length < 65536) {
    const b = Buffer.from([first, 0x80 | 126, 0, 0]);
    b.writeUInt16BE(opts.length, 2);
    return Buffer.concat([b, mask]);
  }
  const b = Buffer.alloc(10);
  b[0] = first;
  b[1] = 0x80 | 127;
  b.writeBigUInt64BE(BigInt(opts.length), 2);
  return Buffer.concat([b, mask]);
}
