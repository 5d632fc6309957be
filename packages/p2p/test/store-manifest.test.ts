import { describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  ManifestError,
  MemoryBlobStore,
  TooLargeError,
  blobAddress,
  buildManifest,
  checkpointRoot,
  decodeManifest,
  encodeManifest,
  pieceLength,
  sameBytes,
} from '../src/index.ts';

describe('MemoryBlobStore', () => {
  it('stores by SHA-256 and evicts least recently used blobs beyond its byte budget', () => {
    const store = new MemoryBlobStore({ maxBytes: 300 });
    const a = store.put(new Uint8Array(100).fill(1));
    const b = store.put(new Uint8Array(100).fill(2));
    const c = store.put(new Uint8Array(100).fill(3));
    expect(sameBytes(a, blobAddress(new Uint8Array(100).fill(1)))).toBe(true);
    store.get(a); // a is now the most recently used
    store.put(new Uint8Array(100).fill(4));
    expect(store.has(a)).toBe(true);
    expect(store.has(b)).toBe(false);
    expect(store.has(c)).toBe(true);
    expect(store.usedBytes).toBe(300);
    expect(() => store.put(new Uint8Array(301))).toThrow(TooLargeError);
    store.delete(a);
    expect(store.usedBytes).toBe(200);
  });
});

describe('checkpoint manifest', () => {
  const bytes = Uint8Array.from({ length: 10_000 }, (_, i) => (i * 13) & 0xff);

  it('round-trips and gives a root that depends only on bytes and piece size', () => {
    const m = buildManifest(bytes, 4096);
    expect(m.pieceHashes).toHaveLength(3);
    expect(pieceLength(m, 2)).toBe(10_000 - 8192);
    const decoded = decodeManifest(encodeManifest(m));
    expect(decoded.totalBytes).toBe(10_000);
    expect(decoded.pieceHashes.map((h) => Buffer.from(h).toString('hex'))).toEqual(
      m.pieceHashes.map((h) => Buffer.from(h).toString('hex')),
    );
    expect(sameBytes(checkpointRoot(bytes, 4096), checkpointRoot(bytes.slice(), 4096))).toBe(true);
    expect(sameBytes(checkpointRoot(bytes, 4096), checkpointRoot(bytes, 2048))).toBe(false);
    expect(buildManifest(new Uint8Array(0)).pieceHashes).toHaveLength(0);
  });

  it('rejects malformed manifests with ManifestError', () => {
    const enc = encodeManifest(buildManifest(bytes, 4096));
    expect(() => decodeManifest(enc.subarray(0, 20))).toThrow(ManifestError);
    expect(() => decodeManifest(enc.subarray(0, enc.length - 1))).toThrow(ManifestError);
    const badMagic = enc.slice();
    badMagic[0] = 0;
    expect(() => decodeManifest(badMagic)).toThrow(ManifestError);
    const badCount = enc.slice();
    badCount[23] = 7; // pieceCount no longer matches totalBytes / pieceSize
    expect(() => decodeManifest(badCount)).toThrow(ManifestError);
    expect(() => buildManifest(bytes, 0)).toThrow(InvalidArgumentError);
  });
});
