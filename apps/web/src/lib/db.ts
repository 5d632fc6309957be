// The browser's own storage (IndexedDB through Dexie): identity keys, and later cached checkpoints, data and
// local metrics for the training worker. One database, versioned schema.
import { Dexie } from 'dexie';
import type { EntityTable } from 'dexie';

/** An Ed25519 key kept in this browser: `seed` is the 32-byte secret (hex), `publicKey` its public key (hex). */
export interface StoredKey {
  /** 'admin' (the main-authority key of the admin console) or 'volunteer' (the training client's identity). */
  role: 'admin' | 'volunteer';
  seed: string;
  publicKey: string;
  createdAt: number;
}

export type MeshtrainDb = Dexie & { keys: EntityTable<StoredKey, 'role'> };

let db: MeshtrainDb | undefined;

export function meshtrainDb(): MeshtrainDb {
  if (!db) {
    db = new Dexie('meshtrain') as MeshtrainDb;
    db.version(1).stores({ keys: 'role' });
  }
  return db;
}
