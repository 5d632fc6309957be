// The StateSnapshot's interned state: lossless (the decoded JSON text, hence the state hash, is the relay's),
// one spelling per state, and smaller where it matters (a run with many clients whose PeerIds derive from
// their keys, as node-trainer's and the tab's do).
import { generateKeyPair, generateKeyPairFromSeed, publicKeyFromRaw } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey, peerIdFromPublicKey } from '@libp2p/peer-id';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  createCoordinator,
  encodeStateSnapshot,
  stateHash,
  tick,
  WireError,
  type CoordinatorState,
} from '../src/index.ts';
import { externState, internState } from '../src/wire/state-interning.ts';
import { bytesToHex } from '../src/crypto/bytes.ts';
import { baseConfig } from './fixtures/coordinator.ts';
import { decodeStateSnapshot } from '../src/wire/state-snapshot.ts';

const SEED = 'ab'.repeat(32);

/** A run in its first epoch with `n` clients, each with the libp2p PeerId of its own Ed25519 key. */
async function runWith(n: number): Promise<CoordinatorState> {
  let now = 1000;
  let s = createCoordinator({
    run_id: 'interning',
    run_seed: SEED,
    config: { ...baseConfig, init_min_clients: 3, max_clients: n + 10 },
    now,
  });
  const ok = (e: Parameters<typeof tick>[1]): void => {
    const r = tick(s, e, now);
    expect(r.error?.message).toBeUndefined();
    s = r.state;
  };
  for (let i = 0; i < n; i++) {
    const key = await generateKeyPairFromSeed('Ed25519', new Uint8Array(32).fill(i + 1));
    ok({ type: 'join', id: bytesToHex(key.publicKey.raw), p2p_id: peerIdFromPrivateKey(key).toString() });
  }
  now += 3;
  ok({ type: 'tick', entropy: 'cd'.repeat(32) });
  expect(s.run_state).toBe('Warmup');
  return s;
}

function snapshotOf(state: CoordinatorState) {
  return { runId: state.run_id, seq: 7, serverTime: 1_700_000_000_000, state };
}

const wireCode = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    return e instanceof WireError ? e.code : `not a WireError: ${String(e)}`;
  }
  return undefined;
};

describe('interned snapshot state', () => {
  it('decodes to the exact JSON text and hash, with every id and derived PeerId interned', async () => {
    const state = await runWith(40);
    const text = JSON.stringify(state);
    const frame = encodeStateSnapshot(snapshotOf(state));
    const back = decodeStateSnapshot(frame);
    expect(JSON.stringify(back.state)).toBe(text);
    expect(bytesToHex(stateHash(back.state))).toBe(bytesToHex(stateHash(state)));

    const { table, text: interned } = internState(state);
    // 40 client keys, the run seed and the entropy; no id and no PeerId is left spelled out.
    expect(table.length).toBe(42);
    expect(interned).not.toMatch(/[0-9a-f]{64}/);
    expect(interned).not.toContain('12D3KooW');
    // Each client appears as a member and as an epoch client: its key once in the table, then references.
    expect(frame.length).toBeLessThan(0.45 * new TextEncoder().encode(text).length);
  });

  it('keeps PeerIds that do not derive from an Ed25519 key, and strings that look like references', () => {
    const value = {
      version: 1,
      a: ['~1', '~~', '~p0', '~', 'peer-3', '12D3KooW' + 'x'.repeat(44), 'A'.repeat(64)],
      ['~0']: { ['0'.repeat(64)]: 1, __proto__x: 2 },
    };
    const { table, text } = internState(value);
    expect(table.length).toBe(1);
    expect(JSON.stringify(externState(table, text))).toBe(JSON.stringify(value));
  });

  it('round-trips any JSON value exactly (fast-check)', async () => {
    const key = await generateKeyPair('Ed25519');
    const peer = peerIdFromPrivateKey(key).toString();
    const hex = bytesToHex(key.publicKey.raw);
    const str = fc.oneof(
      fc.string(),
      fc.constantFrom(hex, peer, '~0', '~p0', '~~0', '~', '__proto__', 'f'.repeat(64), '0'.repeat(64)),
      fc.string().map((s) => `~${s}`),
    );
    const json = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        str,
        fc.integer(),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('value'), { maxLength: 5 }),
        fc.dictionary(str, tie('value'), { maxKeys: 5 }),
      ),
    })).value;
    fc.assert(
      fc.property(json, (v) => {
        const text = JSON.stringify(v);
        const i = internState(JSON.parse(text));
        expect(JSON.stringify(externState(i.table, i.text))).toBe(text);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses every other spelling of a state with a typed error', async () => {
    const state = await runWith(4);
    const { table, text } = internState(state);
    const hexOf = (i: number) => bytesToHex(table[i] as Uint8Array);
    expect(wireCode(() => externState(table, text))).toBeUndefined();
    // An id spelled out instead of referenced (and the table one shorter).
    expect(text).toContain('"~0"');
    expect(() => externState(table, text.replace('"~0"', `"${hexOf(0)}"`))).toThrow(/must be interned/);
    // References out of table order, an unused entry, a duplicate entry, a reference past the table.
    expect(wireCode(() => externState([table[1]!, table[0]!, ...table.slice(2)], text))).toBeUndefined();
    expect(wireCode(() => externState(table, text.replace('"~0"', '"~1"')))).toBe('inconsistent');
    expect(wireCode(() => externState([...table, new Uint8Array(32).fill(9)], text))).toBe('inconsistent');
    expect(wireCode(() => externState([...table, table[0]!], text))).toBe('inconsistent');
    expect(wireCode(() => externState(table.slice(0, 1), text))).toBe('inconsistent');
    // A '~' string that is neither an escape nor a reference; non-canonical JSON.
    expect(wireCode(() => externState(table, text.replace('"~0"', '"~x"')))).toBe('inconsistent');
    expect(wireCode(() => externState(table, ` ${text}`))).toBe('inconsistent');
    expect(wireCode(() => externState(table, text.slice(0, -1)))).toBe('inconsistent');
    // A PeerId derived from a key must be a reference.
    const peerRef = /"~p(\d+)"/.exec(text);
    expect(peerRef).not.toBeNull();
    const peer = peerIdFromPublicKey(publicKeyFromRaw(table[Number(peerRef![1])]!)).toString();
    expect(() => externState(table, text.replace(peerRef![0], `"${peer}"`))).toThrow(
      /PeerId must be interned/,
    );
  });
});
