// The join puzzle (crypto/join-pow.ts) and its check at admission (protocol/admission.ts joinEvent).
import { describe, expect, it } from 'vitest';
import { createCoordinator, joinEvent, MAX_JOIN_POW_BITS, ProtocolRefusal, signJoin } from '../src/index.ts';
import { baseConfig } from './fixtures/coordinator.ts';
import { testIdentity } from './fixtures/wire.ts';
import { checkJoinPow, leadingZeroBits, solveJoinPow } from '../src/crypto/join-pow.ts';

const challenge = new Uint8Array(32).fill(3);
const alice = testIdentity(1);
const bob = testIdentity(2);

describe('join proof of work', () => {
  it('counts leading zero bits from the most significant bit of byte 0', () => {
    expect(leadingZeroBits(Uint8Array.of(0x80))).toBe(0);
    expect(leadingZeroBits(Uint8Array.of(0x01))).toBe(7);
    expect(leadingZeroBits(Uint8Array.of(0, 0x20))).toBe(10);
    expect(leadingZeroBits(new Uint8Array(4))).toBe(32);
  });

  it('a solution checks for its challenge and key only, at its difficulty and below', () => {
    const nonce = solveJoinPow(challenge, alice.publicKey, 12);
    expect(checkJoinPow(challenge, alice.publicKey, nonce, 12)).toBe(true);
    expect(checkJoinPow(challenge, alice.publicKey, nonce, 8)).toBe(true);
    expect(checkJoinPow(challenge, bob.publicKey, nonce, 12)).toBe(false);
    expect(checkJoinPow(new Uint8Array(32).fill(4), alice.publicKey, nonce, 12)).toBe(false);
    // Some harder level the nonce does not reach.
    let harder = 13;
    while (checkJoinPow(challenge, alice.publicKey, nonce, harder)) harder++;
    expect(checkJoinPow(challenge, alice.publicKey, nonce, harder)).toBe(false);
    expect(checkJoinPow(challenge, alice.publicKey, new Uint8Array(7), 1)).toBe(false);
    expect(checkJoinPow(challenge, alice.publicKey, new Uint8Array(8), 0)).toBe(true);
    expect(() => solveJoinPow(challenge, alice.publicKey, MAX_JOIN_POW_BITS + 1)).toThrow(RangeError);
  });

  it('joinEvent refuses a Join without the work its challenge asked for', () => {
    const state = createCoordinator({ run_id: 'r', run_seed: 'ab'.repeat(32), config: baseConfig, now: 1 });
    const fields = { runId: 'r', p2pPeerId: '', deviceKind: 'cpu', challenge };
    const lazy = signJoin(alice.secretKey, fields);
    const refused = joinEvent(state, lazy, challenge, 16);
    expect(refused).toBeInstanceOf(ProtocolRefusal);
    expect((refused as ProtocolRefusal).code).toBe('insufficient_work');
    const worked = signJoin(alice.secretKey, fields, 16);
    expect(joinEvent(state, worked, challenge, 16)).toMatchObject({ type: 'join' });
    // Someone else's solution for the same challenge does not transfer.
    const stolen = { ...signJoin(bob.secretKey, fields), powNonce: worked.powNonce };
    expect((joinEvent(state, stolen, challenge, 16) as ProtocolRefusal).code).toBe('insufficient_work');
  });
});
