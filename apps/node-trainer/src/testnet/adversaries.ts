// Who is who in a testnet: honest trainers, late joiners and adversaries (`--adversary KIND[:N]`). Every
// identity is derived from a fixed seed per process index, so the testnet knows every public key it started
// — the sybil process's many keys included (train/sybil.ts derives them the same way) — and can tell the
// adversaries' results, ejections and hash reports from the honest trainers'.
import { bytesToHex, hexToBytes, identityFromSeed } from '@meshtrain/core';
import { ADVERSARY_NAMES, isSybilKind, type AdversaryName } from '../train/adversary.ts';
import { sybilSeed } from '../train/sybil.ts';

export interface AdversarySpec {
  kind: AdversaryName;
  /** Processes of that kind; for a sybil kind, identities its one process joins. */
  count: number;
}

/** Sybil identities when a sybil kind names no count. */
export const DEFAULT_SYBILS = 50;

/** `KIND` or `KIND:N`, as `--adversary` takes it, or the reason it is not one. */
export function parseAdversarySpec(text: string): AdversarySpec | string {
  const [kind, n, extra] = text.split(':');
  if (extra !== undefined || !kind) return `expected KIND or KIND:N, got '${text}'`;
  if (!(ADVERSARY_NAMES as readonly string[]).includes(kind))
    return `unknown kind '${kind}' (one of ${ADVERSARY_NAMES.join(', ')})`;
  const count = n === undefined ? (isSybilKind(kind as AdversaryName) ? DEFAULT_SYBILS : 1) : Number(n);
  if (!Number.isSafeInteger(count) || count < 1) return `'${text}': N must be an integer ≥ 1`;
  return { kind: kind as AdversaryName, count };
}

/**
 * Adversaries that must be the epoch's first voter to act at all: the designated checkpoint uploader is the
 * first Healthy client in epoch order (core's checkpointUploaderRank), i.e. the first to join.
 */
export const FIRST_VOTER_KINDS: readonly AdversaryName[] = ['no-upload', 'poison-checkpoint'];

/** The identity seed (hex) of process `index`: a fixed byte repeated, so runs repeat. */
export function seedHex(index: number): string {
  if (index < 0 || index > 254) throw new Error('a testnet has at most 255 processes');
  return (index + 1).toString(16).padStart(2, '0').repeat(32);
}

export function publicKeyHex(seed: Uint8Array): string {
  return bytesToHex(identityFromSeed(seed).publicKey);
}

/** The coordinator ids process `index` joins as: one, or `sybils` of them for the sybil process. */
export function idsOf(index: number, sybils = 0): string[] {
  const seed = hexToBytes(seedHex(index));
  if (sybils <= 0) return [publicKeyHex(seed)];
  return Array.from({ length: sybils }, (_, i) => publicKeyHex(sybilSeed(seed, i)));
}
