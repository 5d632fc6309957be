// Binary Merkle tree over 32-byte leaves, so that a client holding one admitted result (fetched from a peer)
// can check it against a per-round root with a logarithmic proof instead of receiving every commitment.
//
// Layout, fixed by the count alone:
//   - level 0 is the leaves; each next level hashes pairs: node = H('meshtrain/merkle-node/v1', left ‖ right);
//   - at a level with an odd number of nodes the last one is promoted unchanged. Duplicating it instead
//     would give [a, b, c] and [a, b, c, c] the same top;
//   - root = H('meshtrain/merkle-root/v1', u32 BE count ‖ top), top = 32 zero bytes when there are no leaves.
//     Binding the count keeps lists of different lengths apart and tells a verifier how many leaves there are.
// Because the shape depends only on the count, and the count is in the root, a leaf can never be passed off
// as an inner node (or the reverse) without a SHA-256 collision, even when leaves are arbitrary bytes.
// Proofs list siblings bottom-up; promoted levels contribute no sibling.
import { bytesEqual } from './bytes.ts';
import { domainTag, sha256Concat, taggedHash } from './hash.ts';

/** Most leaves a tree may have: the coordinator's per-round results stay far below, and 2^20 × 32 B keeps a tree ≤ 64 MiB. */
export const MAX_MERKLE_LEAVES = 1 << 20;

const HASH_BYTES = 32;
const ADMITTED_LEAF_TAG = 'meshtrain/admitted-leaf/v1';
const NODE_TAG = 'meshtrain/merkle-node/v1';
const ROOT_TAG = 'meshtrain/merkle-root/v1';
// Inner nodes are the bulk of the hashing; encoding the tag once instead of per node (what taggedHash does)
// gives the same bytes, since taggedHash(tag, ...) = sha256(domainTag(tag) ‖ ...).
const NODE_PREFIX = domainTag(NODE_TAG);

function u32be(v: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, v, false);
  return out;
}

function isU32(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffff_ffff;
}

function isHash(v: unknown): v is Uint8Array {
  return v instanceof Uint8Array && v.length === HASH_BYTES;
}

function assertHash(v: unknown, what: string): asserts v is Uint8Array {
  if (!(v instanceof Uint8Array)) throw new TypeError(`${what}: expected a Uint8Array`);
  if (v.length !== HASH_BYTES) throw new RangeError(`${what}: expected ${HASH_BYTES} bytes, got ${v.length}`);
}

function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  return sha256Concat(NODE_PREFIX, left, right);
}

function rootHash(count: number, top: Uint8Array): Uint8Array {
  return taggedHash(ROOT_TAG, u32be(count), top);
}

/** Leaf of an admitted result: taggedHash('meshtrain/admitted-leaf/v1', u32 big-endian slot, commitment(32 B)). */
export function admittedLeaf(slot: number, commitment: Uint8Array): Uint8Array {
  if (!isU32(slot)) throw new RangeError(`admittedLeaf: slot must be an integer in 0..2^32-1, got ${slot}`);
  assertHash(commitment, 'admittedLeaf: commitment');
  return taggedHash(ADMITTED_LEAF_TAG, u32be(slot), commitment);
}

/** Siblings on the path of `index` among `count` leaves; inputs already checked (count ≥ 1, index < count). */
function pathLength(count: number, index: number): number {
  let siblings = 0;
  for (let n = count, i = index; n > 1; n = (n + 1) >>> 1, i >>>= 1) {
    // Only an even index with nothing to its right is promoted without a sibling.
    if ((i & 1) === 1 || i + 1 < n) siblings++;
  }
  return siblings;
}

/**
 * Number of siblings in the proof for `index` of `count` leaves (so the proof is this × 32 bytes), exactly as
 * verifyMerkleProof demands it: for callers that bound frames.
 */
export function merkleProofLength(count: number, index: number): number {
  if (!isU32(count) || count < 1 || count > MAX_MERKLE_LEAVES) {
    throw new RangeError(
      `merkleProofLength: count must be an integer in 1..${MAX_MERKLE_LEAVES}, got ${count}`,
    );
  }
  if (!isU32(index) || index >= count) {
    throw new RangeError(`merkleProofLength: index must be an integer in 0..${count - 1}, got ${index}`);
  }
  return pathLength(count, index);
}

export interface MerkleTree {
  readonly count: number;
  /** A fresh copy on every read. */
  readonly root: Uint8Array;
  /** Siblings bottom-up, each a fresh 32-byte copy. */
  proof(index: number): Uint8Array[];
}

/**
 * Builds all levels once (O(n) hashes) so that proof(i) for every i costs O(log n) with no rehashing.
 * The leaves are copied in, so changing the caller's arrays afterwards does not change the tree; each level
 * is one contiguous buffer (about 2n × 32 bytes in all).
 */
export function merkleTree(leaves: readonly Uint8Array[]): MerkleTree {
  if (!Array.isArray(leaves)) throw new TypeError('merkleTree: leaves must be an array of Uint8Array');
  const count = leaves.length;
  if (count > MAX_MERKLE_LEAVES) {
    throw new RangeError(`merkleTree: at most ${MAX_MERKLE_LEAVES} leaves, got ${count}`);
  }
  const base = new Uint8Array(count * HASH_BYTES);
  for (let i = 0; i < count; i++) {
    const leaf = leaves[i];
    assertHash(leaf, `merkleTree: leaf ${i}`);
    base.set(leaf, i * HASH_BYTES);
  }

  const levels: Uint8Array[] = [base];
  for (let level = base, n = count; n > 1;) {
    const m = (n + 1) >>> 1;
    const next = new Uint8Array(m * HASH_BYTES);
    for (let j = 0; j < n >>> 1; j++) {
      const o = 2 * j * HASH_BYTES;
      next.set(
        nodeHash(level.subarray(o, o + HASH_BYTES), level.subarray(o + HASH_BYTES, o + 2 * HASH_BYTES)),
        j * HASH_BYTES,
      );
    }
    if ((n & 1) === 1) next.set(level.subarray((n - 1) * HASH_BYTES), (m - 1) * HASH_BYTES);
    levels.push(next);
    level = next;
    n = m;
  }
  const top = count === 0 ? new Uint8Array(HASH_BYTES) : levels[levels.length - 1]!;
  const root = rootHash(count, top);

  return {
    count,
    get root() {
      return root.slice();
    },
    proof(index: number): Uint8Array[] {
      if (!isU32(index) || index >= count) {
        throw new RangeError(
          count === 0
            ? `MerkleTree.proof: the tree has no leaves (index ${index})`
            : `MerkleTree.proof: index must be an integer in 0..${count - 1}, got ${index}`,
        );
      }
      const out: Uint8Array[] = [];
      for (let d = 0, n = count, i = index; n > 1; d++, n = (n + 1) >>> 1, i >>>= 1) {
        const sibling = i ^ 1;
        if (sibling < n) out.push(levels[d]!.slice(sibling * HASH_BYTES, (sibling + 1) * HASH_BYTES));
      }
      return out;
    },
  };
}

/** Root of `leaves`; the same as merkleTree(leaves).root. */
export function merkleRoot(leaves: readonly Uint8Array[]): Uint8Array {
  return merkleTree(leaves).root;
}

/**
 * Whether `proof` shows `leaf` at `index` of a `count`-leaf tree with this `root`. Never throws: inputs come
 * from peers, so anything malformed (wrong sizes, a count or index out of range, a proof of any length but
 * the one the layout gives) is simply false.
 */
export function verifyMerkleProof(
  root: Uint8Array,
  count: number,
  index: number,
  leaf: Uint8Array,
  proof: readonly Uint8Array[],
): boolean {
  if (!isHash(root) || !isHash(leaf) || !Array.isArray(proof)) return false;
  if (!isU32(count) || count < 1 || count > MAX_MERKLE_LEAVES) return false;
  if (!isU32(index) || index >= count) return false;
  if (proof.length !== pathLength(count, index)) return false;
  for (const p of proof) if (!isHash(p)) return false;

  let node = leaf;
  let k = 0;
  for (let n = count, i = index; n > 1; n = (n + 1) >>> 1, i >>>= 1) {
    if ((i & 1) === 1) node = nodeHash(proof[k++]!, node);
    else if (i + 1 < n) node = nodeHash(node, proof[k++]!);
  }
  return bytesEqual(rootHash(count, node), root);
}
