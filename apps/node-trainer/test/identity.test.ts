// Identity files: created once with mode 0600, read back unchanged, PeerId equal to libp2p's for that key.
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { IdentityError, loadOrCreateIdentity, peerIdOf } from '../src/identity/index.ts';

let root: string | undefined;
afterAll(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

describe('identity', () => {
  it('creates a 0600 key once and reads the same key back', async () => {
    root = await mkdtemp(join(tmpdir(), 'meshtrain-id-'));
    const path = join(root, 'cfg', 'identity.key');
    const a = await loadOrCreateIdentity(path);
    expect(a.created).toBe(true);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    const b = await loadOrCreateIdentity(path);
    expect(b.created).toBe(false);
    expect(b.id).toBe(a.id);
    expect((await readFile(path, 'utf8')).trim()).toMatch(/^[0-9a-f]{64}$/);
  });

  it("derives libp2p's PeerId for the key", async () => {
    root ??= await mkdtemp(join(tmpdir(), 'meshtrain-id-'));
    const path = join(root, 'fixed.key');
    await writeFile(path, `${'07'.repeat(32)}\n`);
    const id = await loadOrCreateIdentity(path);
    // libp2p: peerIdFromPrivateKey(generateKeyPairFromSeed('Ed25519', 32 × 0x07)).
    expect(id.peerId).toBe('12D3KooWRawPbxPtP1eZaJpumGnyWX2DcUyd3RQnydr3eAto4Az7');
    expect(peerIdOf(id.publicKey)).toBe(id.peerId);
  });

  it('refuses a malformed key file instead of replacing it', async () => {
    root ??= await mkdtemp(join(tmpdir(), 'meshtrain-id-'));
    const path = join(root, 'bad.key');
    await writeFile(path, 'not a key');
    await expect(loadOrCreateIdentity(path)).rejects.toBeInstanceOf(IdentityError);
    expect(await readFile(path, 'utf8')).toBe('not a key');
  });
});
