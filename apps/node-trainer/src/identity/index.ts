// The trainer's identity: one Ed25519 key (a 32-byte seed) that is both its coordinator id (public key, hex)
// and its libp2p identity (the PeerId of the same key). Stored as 64 hex digits in a 0600 file.
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { bytesToHex, hexToBytes, identityFromSeed, type Identity } from '@meshtrain/core';

export function defaultIdentityPath(): string {
  const config = process.env.XDG_CONFIG_HOME || join(homedir(), '.config');
  return join(config, 'meshtrain', 'identity.key');
}

export interface LoadedIdentity extends Identity {
  path: string;
  created: boolean;
  /** Coordinator id: the public key as lowercase hex. */
  id: string;
  peerId: string;
}

export class IdentityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'IdentityError';
  }
}

/** Reads the identity file, creating it (mode 0600, directory 0700) with a fresh random key if missing. */
export async function loadOrCreateIdentity(path = defaultIdentityPath()): Promise<LoadedIdentity> {
  let text: string | undefined;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new IdentityError(`${path}: ${(e as Error).message}`);
  }
  let seed: Uint8Array;
  let created = false;
  if (text === undefined) {
    seed = new Uint8Array(randomBytes(32));
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    // `wx`: never overwrite a key another process created in the meantime.
    await writeFile(path, `${bytesToHex(seed)}\n`, { mode: 0o600, flag: 'wx' }).catch(
      async (e: NodeJS.ErrnoException) => {
        if (e.code !== 'EEXIST') throw e;
      },
    );
    await chmod(path, 0o600);
    created = true;
    seed = hexToBytes((await readFile(path, 'utf8')).trim());
  } else {
    const hex = text.trim();
    if (!/^[0-9a-f]{64}$/i.test(hex))
      throw new IdentityError(
        `${path}: expected 64 hex digits (a 32-byte Ed25519 seed); move it away to create a new identity`,
      );
    seed = hexToBytes(hex.toLowerCase());
  }
  const identity = identityFromSeed(seed);
  return {
    ...identity,
    path,
    created,
    id: bytesToHex(identity.publicKey),
    peerId: peerIdOf(identity.publicKey),
  };
}

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

function base58btc(bytes: Uint8Array): string {
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  let out = '';
  while (n > 0n) {
    out = BASE58[Number(n % 58n)] + out;
    n /= 58n;
  }
  for (const b of bytes) {
    if (b !== 0) break;
    out = `1${out}`;
  }
  return out;
}

/**
 * libp2p's PeerId of an Ed25519 public key: base58btc of the identity multihash (0x00, length) of the key's
 * protobuf encoding {Type: Ed25519 = 1, Data: key} — small enough to inline; the P2P node derives the same
 * id from the same seed.
 */
export function peerIdOf(publicKey: Uint8Array): string {
  const proto = new Uint8Array([0x08, 0x01, 0x12, 0x20, ...publicKey]);
  return base58btc(new Uint8Array([0x00, proto.length, ...proto]));
}
