// Ed25519 keys generated once per browser and kept in IndexedDB (Dexie). The secret never leaves the browser
// except through an explicit export by the user.
import { bytesToHex, hexToBytes, identityFromSeed, isHex32 } from '@meshtrain/core';
import { meshtrainDb } from './db.ts';
import type { StoredKey } from './db.ts';

export interface KeyPair {
  role: StoredKey['role'];
  secretKey: Uint8Array;
  publicKey: string;
  createdAt: number;
}

function toPair(k: StoredKey): KeyPair {
  return { role: k.role, secretKey: hexToBytes(k.seed, 32), publicKey: k.publicKey, createdAt: k.createdAt };
}

function fromSeed(role: StoredKey['role'], seed: Uint8Array): StoredKey {
  const id = identityFromSeed(seed);
  return { role, seed: bytesToHex(seed), publicKey: bytesToHex(id.publicKey), createdAt: Date.now() };
}

/** The stored key for `role`, generated (and stored) on first use. */
export async function loadOrCreateKey(role: StoredKey['role']): Promise<KeyPair> {
  const db = meshtrainDb();
  const existing = await db.keys.get(role);
  if (existing) return toPair(existing);
  const created = fromSeed(role, crypto.getRandomValues(new Uint8Array(32)));
  // Two tabs may race on first use: keep whichever was written first.
  await db.transaction('rw', db.keys, async () => {
    if (!(await db.keys.get(role))) await db.keys.add(created);
  });
  const stored = await db.keys.get(role);
  if (!stored) throw new Error('IndexedDB did not keep the new key (private browsing mode?)');
  return toPair(stored);
}

/** Replaces the stored key with one imported from its 64-hex-digit secret seed. */
export async function importKey(role: StoredKey['role'], seedHex: string): Promise<KeyPair> {
  const clean = seedHex.trim().toLowerCase();
  if (!isHex32(clean)) throw new Error('the secret key is 64 hex digits (32 bytes)');
  const k = fromSeed(role, hexToBytes(clean, 32));
  await meshtrainDb().keys.put(k);
  return toPair(k);
}

/** JSON a user can save and import elsewhere. */
export function exportKeyJson(k: KeyPair): string {
  return JSON.stringify(
    {
      kind: 'meshtrain-ed25519-key',
      role: k.role,
      publicKey: k.publicKey,
      secretKey: bytesToHex(k.secretKey),
      createdAt: new Date(k.createdAt).toISOString(),
    },
    null,
    2,
  );
}
