// Join signatures: bound to the relay's challenge, the run, the identity and everything claimed.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeJoin, signJoin } from '../src/index.ts';
import type { Join } from '../src/index.ts';
import { testIdentity, wireCode as code } from './fixtures/wire.ts';
import { decodeJoin, verifyJoin } from '../src/wire/membership.ts';

const alice = testIdentity(0x11);
const mallory = testIdentity(0x22);
const challenge = Uint8Array.from({ length: 32 }, (_, i) => i * 7);

function join(): Join {
  return signJoin(alice.secretKey, {
    runId: 'run-1',
    p2pPeerId: '12D3KooWExamplePeer',
    deviceKind: 'webgpu',
    challenge,
  });
}

describe('join', () => {
  it('verifies against the issued challenge, also after a frame round trip', () => {
    const j = join();
    expect(j.pubkey).toEqual(alice.publicKey);
    verifyJoin(j, challenge);
    const back = decodeJoin(encodeJoin(j));
    expect(back).toEqual(j);
    verifyJoin(back, challenge);
  });

  it("fails for another connection's challenge (no replay)", () => {
    const other = challenge.slice();
    other[31]! ^= 0x80;
    expect(code(() => verifyJoin(join(), other))).toBe('bad_signature');
    // Even a join whose challenge field is rewritten to the new one fails: the signature covers it.
    expect(code(() => verifyJoin({ ...join(), challenge: other }, other))).toBe('bad_signature');
  });

  it('fails when any signed field changes', () => {
    const altered: Partial<Join>[] = [
      { runId: 'run-2' },
      { p2pPeerId: '12D3KooWOtherPeer' },
      { deviceKind: 'cpu' },
      { pubkey: mallory.publicKey },
    ];
    for (const a of altered)
      expect(code(() => verifyJoin({ ...join(), ...a }, challenge))).toBe('bad_signature');
  });

  it('a signature by another key does not pass as alice', () => {
    const m = signJoin(mallory.secretKey, {
      runId: 'run-1',
      p2pPeerId: '12D3KooWExamplePeer',
      deviceKind: 'webgpu',
      challenge,
    });
    expect(code(() => verifyJoin({ ...m, pubkey: alice.publicKey }, challenge))).toBe('bad_signature');
  });

  it('length-prefixed fields: moving bytes between peer id and device kind breaks the signature', () => {
    const j = signJoin(alice.secretKey, { runId: 'r', p2pPeerId: 'ab', deviceKind: 'c', challenge });
    expect(code(() => verifyJoin({ ...j, p2pPeerId: 'a', deviceKind: 'bc' }, challenge))).toBe(
      'bad_signature',
    );
  });

  it('malformed joins are rejected with WireError, never another exception', () => {
    expect(code(() => verifyJoin({ ...join(), challenge: new Uint8Array(31) }, challenge))).toBe(
      'bad_signature',
    );
    expect(code(() => verifyJoin({ ...join(), pubkey: new Uint8Array(31) }, challenge))).toBe(
      'bad_signature',
    );
    expect(code(() => verifyJoin({ ...join(), runId: '' }, challenge))).toBe('bad_signature');
    expect(code(() => verifyJoin({ ...join(), signature: new Uint8Array(64) }, challenge))).toBe(
      'bad_signature',
    );
  });

  it('any random challenge/peer/device round-trips and verifies only with its own challenge', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.string({ maxLength: 40 }),
        fc.constantFrom('webgpu', 'cuda', 'cpu', ''),
        (ch, peer, device) => {
          const j = signJoin(alice.secretKey, {
            runId: 'run',
            p2pPeerId: peer,
            deviceKind: device,
            challenge: ch,
          });
          const back = decodeJoin(encodeJoin(j));
          verifyJoin(back, ch);
          const other = ch.slice();
          other[0]! ^= 1;
          expect(code(() => verifyJoin(back, other))).toBe('bad_signature');
        },
      ),
      { numRuns: 25 },
    );
  });
});
