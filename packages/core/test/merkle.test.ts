// The Merkle tree over admitted results (crypto/merkle.ts): layout, proofs, and refusal of tampered or
// malformed proofs.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bytesToHex, sha256, taggedHash } from '../src/index.ts';
import {
  admittedLeaf,
  MAX_MERKLE_LEAVES,
  merkleProofLength,
  merkleRoot,
  merkleTree,
  verifyMerkleProof,
} from '../src/crypto/merkle.ts';

const NODE = 'meshtrain/merkle-node/v1';
const ROOT = 'meshtrain/merkle-root/v1';

function be32(v: number): Uint8Array {
  return Uint8Array.of(v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255);
}

/** Deterministic distinct leaves, so the large cases need no arbitrary. */
function leavesOf(n: number, salt = 0): Uint8Array[] {
  return Array.from({ length: n }, (_, i) => sha256(Uint8Array.of(salt, ...be32(i))));
}

/** The layout written out level by level with taggedHash, independently of the module's flat buffers. */
function referenceRoot(leaves: readonly Uint8Array[]): Uint8Array {
  let level = [...leaves];
  while (level.length > 1) {
    const next: Uint8Array[] = [];
    for (let i = 0; i < level.length; i += 2) {
      next.push(i + 1 < level.length ? taggedHash(NODE, level[i]!, level[i + 1]!) : level[i]!);
    }
    level = next;
  }
  return taggedHash(ROOT, be32(leaves.length), level[0] ?? new Uint8Array(32));
}

function flipBit(b: Uint8Array, bit: number): Uint8Array {
  const out = b.slice();
  out[bit >>> 3]! ^= 1 << (bit & 7);
  return out;
}

const hash32 = fc.uint8Array({ minLength: 32, maxLength: 32 });
// Random bytes make equal leaves practically impossible, which the "different index fails" checks rely on
// (with two equal leaves a proof for one also honestly proves the other).
const leafList = fc.array(hash32, { minLength: 0, maxLength: 70 });

/** Every index proves its leaf with exactly merkleProofLength siblings. */
function checkAllProofs(leaves: readonly Uint8Array[]): void {
  const tree = merkleTree(leaves);
  const root = tree.root;
  expect(tree.count).toBe(leaves.length);
  for (let i = 0; i < leaves.length; i++) {
    const proof = tree.proof(i);
    expect(proof.length).toBe(merkleProofLength(leaves.length, i));
    expect(proof.every((p) => p.length === 32)).toBe(true);
    expect(verifyMerkleProof(root, leaves.length, i, leaves[i]!, proof)).toBe(true);
  }
}

describe('layout', () => {
  it('matches a root built by hand for three and five leaves', () => {
    const [a, b, c, d, e] = leavesOf(5);
    const ab = taggedHash(NODE, a!, b!);
    expect(bytesToHex(merkleRoot([a!, b!, c!]))).toBe(
      bytesToHex(taggedHash(ROOT, Uint8Array.of(0, 0, 0, 3), taggedHash(NODE, ab, c!))),
    );
    const tree3 = merkleTree([a!, b!, c!]);
    expect(tree3.proof(0).map(bytesToHex)).toEqual([b!, c!].map(bytesToHex));
    expect(tree3.proof(1).map(bytesToHex)).toEqual([a!, c!].map(bytesToHex));
    // c is promoted past level 0, so its only sibling is H(a, b).
    expect(tree3.proof(2).map(bytesToHex)).toEqual([bytesToHex(ab)]);

    const abcd = taggedHash(NODE, ab, taggedHash(NODE, c!, d!));
    const tree5 = merkleTree([a!, b!, c!, d!, e!]);
    expect(bytesToHex(tree5.root)).toBe(
      bytesToHex(taggedHash(ROOT, Uint8Array.of(0, 0, 0, 5), taggedHash(NODE, abcd, e!))),
    );
    expect(tree5.proof(4).map(bytesToHex)).toEqual([bytesToHex(abcd)]);
  });

  it('an empty tree hashes a zero top under count 0 and has no proofs', () => {
    const tree = merkleTree([]);
    expect(tree.count).toBe(0);
    expect(bytesToHex(tree.root)).toBe(bytesToHex(taggedHash(ROOT, new Uint8Array(4), new Uint8Array(32))));
    expect(() => tree.proof(0)).toThrow(RangeError);
    expect(verifyMerkleProof(tree.root, 0, 0, new Uint8Array(32), [])).toBe(false);
  });

  it('a single leaf is its own top, with an empty proof', () => {
    const [a] = leavesOf(1);
    const tree = merkleTree([a!]);
    expect(bytesToHex(tree.root)).toBe(bytesToHex(taggedHash(ROOT, Uint8Array.of(0, 0, 0, 1), a!)));
    expect(tree.proof(0)).toEqual([]);
    expect(merkleProofLength(1, 0)).toBe(0);
    expect(verifyMerkleProof(tree.root, 1, 0, a!, [])).toBe(true);
    expect(verifyMerkleProof(tree.root, 1, 0, leavesOf(1, 9)[0]!, [])).toBe(false);
  });

  it('matches the level-by-level reference for random lists, and merkleRoot equals merkleTree().root', () => {
    fc.assert(
      fc.property(leafList, (leaves) => {
        const expected = bytesToHex(referenceRoot(leaves));
        expect(bytesToHex(merkleTree(leaves).root)).toBe(expected);
        expect(bytesToHex(merkleRoot(leaves))).toBe(expected);
      }),
      { numRuns: 200 },
    );
  });

  it('lists of different lengths never share a root', () => {
    const [a, b, c] = leavesOf(3);
    const roots = [[a!, b!, c!], [a!, b!, c!, c!], [a!, b!], [a!, b!, b!], [a!], []].map((l) =>
      bytesToHex(merkleRoot(l)),
    );
    expect(new Set(roots).size).toBe(roots.length);
    // Without the count in the root, [a, b] and the one-leaf list [H(a, b)] would have the same top.
    expect(bytesToHex(merkleRoot([a!, b!]))).not.toBe(bytesToHex(merkleRoot([taggedHash(NODE, a!, b!)])));
  });

  it('merkleProofLength follows promotions: 2^k leaves need k siblings, a lone last leaf fewer', () => {
    for (let k = 0; k <= 20; k++) {
      expect(merkleProofLength(2 ** k, 0)).toBe(k);
      expect(merkleProofLength(2 ** k, 2 ** k - 1)).toBe(k);
    }
    expect([0, 1, 2].map((i) => merkleProofLength(3, i))).toEqual([2, 2, 1]);
    expect([0, 1, 2, 3, 4, 5].map((i) => merkleProofLength(6, i))).toEqual([3, 3, 3, 3, 2, 2]);
    // Leaf 1024 of 1025 is promoted ten times, then meets the top of the first 1024.
    expect(merkleProofLength(1025, 1024)).toBe(1);
    expect(merkleProofLength(MAX_MERKLE_LEAVES, MAX_MERKLE_LEAVES - 1)).toBe(20);
    for (const [count, index] of [
      [0, 0],
      [3, 3],
      [3, -1],
      [3, 1.5],
      [MAX_MERKLE_LEAVES + 1, 0],
      [NaN, 0],
    ] as const) {
      expect(() => merkleProofLength(count, index)).toThrow(RangeError);
    }
  });
});

describe('proofs', () => {
  it('every index of random lists verifies with merkleProofLength siblings', () => {
    fc.assert(fc.property(leafList, checkAllProofs), { numRuns: 150 });
  });

  it('every index of 1000 and 1025 leaves verifies', () => {
    checkAllProofs(leavesOf(1000));
    checkAllProofs(leavesOf(1025));
  });

  it('fails when a random bit of the root, the leaf or a proof entry is flipped', () => {
    fc.assert(
      fc.property(
        fc.array(hash32, { minLength: 1, maxLength: 70 }),
        fc.nat(),
        fc.nat(),
        fc.nat(255),
        (leaves, pickIndex, pickEntry, bit) => {
          const tree = merkleTree(leaves);
          const count = leaves.length;
          const i = pickIndex % count;
          const proof = tree.proof(i);
          expect(verifyMerkleProof(flipBit(tree.root, bit), count, i, leaves[i]!, proof)).toBe(false);
          expect(verifyMerkleProof(tree.root, count, i, flipBit(leaves[i]!, bit), proof)).toBe(false);
          if (proof.length > 0) {
            const k = pickEntry % proof.length;
            const bad = proof.map((p, j) => (j === k ? flipBit(p, bit) : p));
            expect(verifyMerkleProof(tree.root, count, i, leaves[i]!, bad)).toBe(false);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('fails for every single-bit flip anywhere, at every index of an 11-leaf tree', () => {
    const leaves = leavesOf(11);
    const tree = merkleTree(leaves);
    const root = tree.root;
    for (let i = 0; i < 11; i++) {
      const proof = tree.proof(i);
      for (let bit = 0; bit < 256; bit++) {
        expect(verifyMerkleProof(flipBit(root, bit), 11, i, leaves[i]!, proof)).toBe(false);
        expect(verifyMerkleProof(root, 11, i, flipBit(leaves[i]!, bit), proof)).toBe(false);
        for (let k = 0; k < proof.length; k++) {
          const bad = proof.map((p, j) => (j === k ? flipBit(p, bit) : p));
          expect(verifyMerkleProof(root, 11, i, leaves[i]!, bad)).toBe(false);
        }
      }
    }
  });

  it('fails under another index or count, with another index’s proof, or truncated/extended', () => {
    fc.assert(
      fc.property(fc.array(hash32, { minLength: 1, maxLength: 40 }), (leaves) => {
        const tree = merkleTree(leaves);
        const root = tree.root;
        const count = leaves.length;
        for (let i = 0; i < count; i++) {
          const proof = tree.proof(i);
          const leaf = leaves[i]!;
          for (let j = 0; j < count; j++) {
            if (j === i) continue;
            expect(verifyMerkleProof(root, count, j, leaf, proof)).toBe(false);
            const other = tree.proof(j);
            // Same-length proofs are the ones that get past the length check and must fail on the hash.
            if (other.length === proof.length) {
              expect(verifyMerkleProof(root, count, i, leaf, other)).toBe(false);
            }
          }
          for (let c = 1; c <= count + 3; c++) {
            if (c !== count && i < c) expect(verifyMerkleProof(root, c, i, leaf, proof)).toBe(false);
          }
          if (proof.length > 0) {
            expect(verifyMerkleProof(root, count, i, leaf, proof.slice(0, -1))).toBe(false);
            expect(verifyMerkleProof(root, count, i, leaf, proof.slice(1))).toBe(false);
          }
          expect(verifyMerkleProof(root, count, i, leaf, [...proof, new Uint8Array(32)])).toBe(false);
          expect(verifyMerkleProof(root, count, i, leaf, [...proof, proof[0] ?? leaf])).toBe(false);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('an index past the end cannot pass off the top as a leaf', () => {
    // In a 2^k-leaf tree, index 2^k would be promoted at every level, so without the index bound the top
    // itself would "verify" as an extra leaf with an empty proof.
    const [a, b, c, d] = leavesOf(4);
    const top = taggedHash(NODE, taggedHash(NODE, a!, b!), taggedHash(NODE, c!, d!));
    const root = merkleRoot([a!, b!, c!, d!]);
    expect(bytesToHex(root)).toBe(bytesToHex(taggedHash(ROOT, Uint8Array.of(0, 0, 0, 4), top)));
    expect(verifyMerkleProof(root, 4, 4, top, [])).toBe(false);
  });

  it('a proof for another tree of the same size does not carry over', () => {
    const a = merkleTree(leavesOf(9, 1));
    const b = merkleTree(leavesOf(9, 2));
    const leaf = leavesOf(9, 1)[4]!;
    expect(verifyMerkleProof(a.root, 9, 4, leaf, a.proof(4))).toBe(true);
    expect(verifyMerkleProof(b.root, 9, 4, leaf, a.proof(4))).toBe(false);
  });

  it('hostile inputs to verifyMerkleProof answer false without throwing', () => {
    const leaves = leavesOf(5);
    const tree = merkleTree(leaves);
    const root = tree.root;
    const proof = tree.proof(1);
    const leaf = leaves[1]!;
    expect(verifyMerkleProof(root, 5, 1, leaf, proof)).toBe(true);

    const bad: Array<[unknown, unknown, unknown, unknown, unknown]> = [
      [root, NaN, 1, leaf, proof],
      [root, 5, NaN, leaf, proof],
      [root, -1, 1, leaf, proof],
      [root, 5, -1, leaf, proof],
      [root, 2 ** 32, 1, leaf, proof],
      [root, 5, 2 ** 32, leaf, proof],
      [root, 5 + 2 ** 32, 1, leaf, proof],
      [root, Infinity, 1, leaf, proof],
      [root, 5.5, 1, leaf, proof],
      [root, 5, 1.5, leaf, proof],
      [root, '5', 1, leaf, proof],
      [root, 5, '1', leaf, proof],
      [root, 5, 5, leaf, proof],
      [root, 0, 0, leaf, []],
      [root, MAX_MERKLE_LEAVES + 1, 1, leaf, proof],
      [root, 2 ** 31, 1, leaf, proof],
      [root.subarray(0, 31), 5, 1, leaf, proof],
      [new Uint8Array(33), 5, 1, leaf, proof],
      [Array.from(root), 5, 1, leaf, proof],
      [null, 5, 1, leaf, proof],
      [root, 5, 1, leaf.subarray(0, 31), proof],
      [root, 5, 1, Array.from(leaf), proof],
      [root, 5, 1, undefined, proof],
      [root, 5, 1, leaf, [proof[0]!.subarray(0, 31), ...proof.slice(1)]],
      [root, 5, 1, leaf, [...proof.slice(0, -1), new Uint8Array(33)]],
      [root, 5, 1, leaf, [Array.from(proof[0]!), ...proof.slice(1)]],
      [root, 5, 1, leaf, [null, ...proof.slice(1)]],
      [root, 5, 1, leaf, [undefined, ...proof.slice(1)]],
      [root, 5, 1, leaf, [bytesToHex(proof[0]!), ...proof.slice(1)]],
      [root, 5, 1, leaf, null],
      [root, 5, 1, leaf, undefined],
      [root, 5, 1, leaf, proof[0]],
      [root, 5, 1, leaf, { length: proof.length, 0: proof[0], 1: proof[1], 2: proof[2] }],
      [root, 5, 1, leaf, new Array(proof.length)],
    ];
    for (const args of bad) {
      const call = () => (verifyMerkleProof as (...a: unknown[]) => boolean)(...args);
      expect(call).not.toThrow();
      expect(call()).toBe(false);
    }
  });
});

describe('validation and ownership', () => {
  it('merkleTree and proof() reject programmer errors with RangeError/TypeError', () => {
    const good = leavesOf(3);
    expect(() => merkleTree([good[0]!, new Uint8Array(31)])).toThrow(/leaf 1: expected 32 bytes, got 31/);
    expect(() => merkleTree([good[0]!, new Uint8Array(31)])).toThrow(RangeError);
    expect(() => merkleTree([good[0]!, new Uint8Array(33)])).toThrow(RangeError);
    expect(() => merkleTree([Array.from(good[0]!) as unknown as Uint8Array])).toThrow(TypeError);
    expect(() => merkleTree(null as unknown as Uint8Array[])).toThrow(TypeError);
    expect(() => merkleTree(new Array<Uint8Array>(MAX_MERKLE_LEAVES + 1).fill(good[0]!))).toThrow(RangeError);
    const tree = merkleTree(good);
    for (const i of [-1, 3, 1.5, NaN, 2 ** 32]) expect(() => tree.proof(i)).toThrow(RangeError);
  });

  it('later changes to the caller’s leaves, a returned proof or a read root do not leak into the tree', () => {
    const leaves = leavesOf(6);
    const copies = leaves.map((l) => l.slice());
    const tree = merkleTree(leaves);
    const root = bytesToHex(tree.root);
    const proof2 = tree.proof(2).map(bytesToHex);
    for (const l of leaves) l.fill(0xee);
    tree.proof(2)[0]!.fill(0);
    tree.root.fill(0);
    expect(bytesToHex(tree.root)).toBe(root);
    expect(tree.proof(2).map(bytesToHex)).toEqual(proof2);
    expect(verifyMerkleProof(tree.root, 6, 2, copies[2]!, tree.proof(2))).toBe(true);
  });
});

describe('admittedLeaf', () => {
  const commitment = sha256(Uint8Array.of(1));

  it('is taggedHash over the big-endian slot and the commitment', () => {
    expect(bytesToHex(admittedLeaf(0x01020304, commitment))).toBe(
      bytesToHex(taggedHash('meshtrain/admitted-leaf/v1', Uint8Array.of(1, 2, 3, 4), commitment)),
    );
    expect(admittedLeaf(0xffff_ffff, commitment).length).toBe(32);
  });

  it('differs for different slots and commitments', () => {
    fc.assert(
      fc.property(fc.nat(), fc.nat(), hash32, hash32, (s1, s2, c1, c2) => {
        fc.pre(s1 !== s2 && bytesToHex(c1) !== bytesToHex(c2));
        const a = bytesToHex(admittedLeaf(s1, c1));
        expect(bytesToHex(admittedLeaf(s2, c1))).not.toBe(a);
        expect(bytesToHex(admittedLeaf(s1, c2))).not.toBe(a);
      }),
    );
  });

  it('rejects a slot outside u32 and a commitment that is not 32 bytes', () => {
    for (const s of [-1, 2 ** 32, 1.5, NaN, Infinity]) {
      expect(() => admittedLeaf(s, commitment)).toThrow(RangeError);
    }
    expect(() => admittedLeaf(1, new Uint8Array(31))).toThrow(RangeError);
    expect(() => admittedLeaf(1, Array.from(commitment) as unknown as Uint8Array)).toThrow(TypeError);
  });

  it('leaves of admitted results prove their slot and commitment', () => {
    const commitments = leavesOf(7, 5);
    const slots = [3, 9, 10, 11, 40, 41, 1000];
    const leaves = slots.map((s, i) => admittedLeaf(s, commitments[i]!));
    const tree = merkleTree(leaves);
    expect(verifyMerkleProof(tree.root, 7, 4, admittedLeaf(40, commitments[4]!), tree.proof(4))).toBe(true);
    expect(verifyMerkleProof(tree.root, 7, 4, admittedLeaf(39, commitments[4]!), tree.proof(4))).toBe(false);
  });
});
