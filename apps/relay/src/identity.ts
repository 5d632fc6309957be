// The relay's own Ed25519 identity, kept in <data-dir>/relay-identity.json (mode 0600). It is the main
// authority of runs the relay creates itself (the embedded default run, --config), so an operator with the
// data dir can administer them with signed requests like any other run creator.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { identityFromSeed, isHex32 } from '@meshtrain/core';
import type { Identity } from '@meshtrain/core';

export const IDENTITY_FILE = 'relay-identity.json';

export function loadOrCreateRelayIdentity(dataDir: string): Identity {
  const file = join(dataDir, IDENTITY_FILE);
  if (existsSync(file)) {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as { seed?: unknown };
    if (!isHex32(parsed.seed)) throw new Error(`${file}: "seed" must be 64 lowercase hex digits`);
    return identityFromSeed(Uint8Array.from(Buffer.from(parsed.seed, 'hex')));
  }
  const seed = randomBytes(32);
  writeFileSync(file, `${JSON.stringify({ seed: seed.toString('hex') })}\n`, { mode: 0o600, flag: 'wx' });
  return identityFromSeed(new Uint8Array(seed));
}
