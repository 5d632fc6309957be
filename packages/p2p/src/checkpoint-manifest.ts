import { ManifestError, InvalidArgumentError } from './errors.ts';
import { sameBytes, sha256Bytes } from './hash.ts';
import { concatBytes } from '@noble/hashes/utils.js';
import { readU32, readU64, u32, u64 } from './stream-io.ts';

/**
 * A checkpoint as peers share it: the bytes (e.g. a safetensors file) cut into fixed-size pieces, described
 * by a manifest whose SHA-256 is the checkpoint's root hash. The root is a pure function of (bytes,
 * pieceSize), so the relay, which holds the checkpoint, computes the same root as every peer that shares
 * it; the coordinator publishes the root and a joiner verifies the manifest, then each piece, against it.
 *
 * Manifest layout (all integers big-endian):
 *   magic "MTCK"[4] | version[1] = 1 | reserved[3] = 0 | totalBytes[8] | pieceSize[4] | pieceCount[4]
 *   | contentHash[32] = SHA-256(all bytes) | pieceHashes[pieceCount * 32]
 * rootHash = SHA-256(manifest bytes).
 */

export const MANIFEST_MAGIC = Uint8Array.of(0x4d, 0x54, 0x43, 0x4b); // "MTCK"
export const MANIFEST_VERSION = 1;
export const MANIFEST_HEADER_BYTES = 4 + 1 + 3 + 8 + 4 + 4 + 32;
export const DEFAULT_PIECE_SIZE = 1024 * 1024;
/** Pieces above this would make one request hold a stream for too long and a retry too costly. */
export const MAX_PIECE_SIZE = 16 * 1024 * 1024;

export interface CheckpointManifest {
  totalBytes: number;
  pieceSize: number;
  pieceHashes: Uint8Array[];
  /** SHA-256 of the whole checkpoint: lets a caller check the assembled bytes against a whole-file hash. */
  contentHash: Uint8Array;
}

export function pieceCountFor(totalBytes: number, pieceSize: number): number {
  return totalBytes === 0 ? 0 : Math.ceil(totalBytes / pieceSize);
}

/** Byte length of piece `index` (the last one may be short). */
export function pieceLength(
  manifest: Pick<CheckpointManifest, 'totalBytes' | 'pieceSize'>,
  index: number,
): number {
  return Math.min(manifest.pieceSize, manifest.totalBytes - index * manifest.pieceSize);
}

/** Builds the manifest of `bytes`. */
export function buildManifest(bytes: Uint8Array, pieceSize = DEFAULT_PIECE_SIZE): CheckpointManifest {
  if (!Number.isInteger(pieceSize) || pieceSize <= 0 || pieceSize > MAX_PIECE_SIZE) {
    throw new InvalidArgumentError(`pieceSize must be an integer in 1..${MAX_PIECE_SIZE}, got ${pieceSize}`);
  }
  const count = pieceCountFor(bytes.length, pieceSize);
  const pieceHashes: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    pieceHashes.push(sha256Bytes(bytes.subarray(i * pieceSize, Math.min((i + 1) * pieceSize, bytes.length))));
  }
  return { totalBytes: bytes.length, pieceSize, pieceHashes, contentHash: sha256Bytes(bytes) };
}

export function encodeManifest(m: CheckpointManifest): Uint8Array {
  return concatBytes(
    MANIFEST_MAGIC,
    Uint8Array.of(MANIFEST_VERSION, 0, 0, 0),
    u64(m.totalBytes),
    u32(m.pieceSize),
    u32(m.pieceHashes.length),
    m.contentHash,
    ...m.pieceHashes,
  );
}

/** Parses and checks a manifest for self-consistency; throws ManifestError. */
export function decodeManifest(bytes: Uint8Array): CheckpointManifest {
  if (bytes.length < MANIFEST_HEADER_BYTES)
    throw new ManifestError(`manifest too short: ${bytes.length} bytes`);
  if (!sameBytes(bytes.subarray(0, 4), MANIFEST_MAGIC))
    throw new ManifestError('not a meshtrain checkpoint manifest');
  if (bytes[4] !== MANIFEST_VERSION) throw new ManifestError(`unsupported manifest version ${bytes[4]}`);
  const totalBytes = readU64(bytes, 8);
  const pieceSize = readU32(bytes, 16);
  const count = readU32(bytes, 20);
  if (!Number.isSafeInteger(totalBytes)) throw new ManifestError('manifest totalBytes out of range');
  if (pieceSize === 0 || pieceSize > MAX_PIECE_SIZE)
    throw new ManifestError(`manifest pieceSize ${pieceSize} invalid`);
  if (count !== pieceCountFor(totalBytes, pieceSize)) {
    throw new ManifestError(
      `manifest has ${count} pieces, ${totalBytes} bytes at ${pieceSize} need ${pieceCountFor(totalBytes, pieceSize)}`,
    );
  }
  if (bytes.length !== MANIFEST_HEADER_BYTES + 32 * count) {
    throw new ManifestError(
      `manifest is ${bytes.length} bytes, expected ${MANIFEST_HEADER_BYTES + 32 * count}`,
    );
  }
  const contentHash = bytes.slice(24, 56);
  const pieceHashes: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const at = MANIFEST_HEADER_BYTES + 32 * i;
    pieceHashes.push(bytes.slice(at, at + 32));
  }
  return { totalBytes, pieceSize, pieceHashes, contentHash };
}

/** The root hash a coordinator publishes for a checkpoint: SHA-256 of its encoded manifest. */
export function checkpointRoot(bytes: Uint8Array, pieceSize = DEFAULT_PIECE_SIZE): Uint8Array {
  return sha256Bytes(encodeManifest(buildManifest(bytes, pieceSize)));
}
