// The client's results store and result fetcher on their own, with an injected clock and sleep so retries,
// backoff and the patience deadline run instantly and are counted exactly.
import {
  bytesToHex,
  encodeSignedResult,
  encodeTrainingResult,
  identityFromSeed,
  signResult,
  type TrainingResult,
} from '@meshtrain/core';
import { describe, expect, it } from 'vitest';
import {
  ANNOUNCE_FETCH_ATTEMPTS,
  ANNOUNCE_FETCH_BACKOFF_MS,
  FETCH_PATIENCE_MS,
  FETCH_RETRY_DELAY_MS,
} from '../src/client/defaults.ts';
import { ResultFetcher, type ResultFetcherOptions } from '../src/client/result-fetcher.ts';
import { ResultsStore, type HeldResult } from '../src/client/results-store.ts';

const alice = identityFromSeed(new Uint8Array(32).fill(1));
const aliceId = bytesToHex(alice.publicKey);

function signed(step: number, start: number, end: number, nonce = 1, runId = 'unit') {
  const result: TrainingResult = { runId, step, batch: { start, end }, trainerNonce: nonce, tensors: [] };
  const envelope = signResult(alice.secretKey, result);
  return {
    result,
    commitment: envelope.commitment,
    frame: encodeSignedResult({ envelope, result }),
    trainingFrame: encodeTrainingResult(result),
  };
}

function held(step: number, start: number, end: number, nonce = 1): HeldResult {
  const s = signed(step, start, end, nonce);
  return { commitment: s.commitment, from: aliceId, frame: s.frame, result: s.result };
}

/** A clock that only moves when the code under test sleeps; every sleep is recorded. */
function virtualTime() {
  const t = { now: 0, sleeps: [] as number[] };
  return {
    t,
    now: () => t.now,
    sleep: async (ms: number) => {
      t.sleeps.push(ms);
      t.now += ms;
    },
  };
}

function fetcher(parts: Partial<ResultFetcherOptions> & { store?: ResultsStore } = {}) {
  const store = parts.store ?? new ResultsStore();
  const stats = { bytesReceived: 0, bytesFromPeers: 0 };
  const clock = virtualTime();
  const f = new ResultFetcher({
    runId: 'unit',
    store,
    link: { fetchResult: async () => null },
    stats,
    now: clock.now,
    sleep: clock.sleep,
    ...parts,
  });
  return { f, store, stats, clock };
}

describe('ResultsStore', () => {
  it('keys candidates by step and batch, and gives each sender its own', () => {
    const store = new ResultsStore();
    const a = signed(5, 0, 3);
    const b = signed(5, 0, 3, 2);
    store.addCandidate(5, { start: 0, end: 3 }, a.commitment, aliceId);
    store.addCandidate(5, { start: 0, end: 3 }, a.commitment, aliceId); // duplicate: once
    store.addCandidate(5, { start: 0, end: 3 }, b.commitment, 'bob');
    store.addCandidate(5, { start: 0, end: 4 }, b.commitment, aliceId); // another batch (same start)
    store.addCandidate(6, { start: 0, end: 3 }, b.commitment, aliceId); // another step
    expect(store.commitmentsFor(5, { start: 0, end: 3 }, aliceId)).toEqual([a.commitment]);
    expect(store.commitmentsFor(5, { start: 0, end: 3 }, 'bob')).toEqual([b.commitment]);
    expect(store.commitmentsFor(5, { start: 0, end: 4 }, aliceId)).toEqual([b.commitment]);
    expect(store.commitmentsFor(7, { start: 0, end: 3 }, aliceId)).toEqual([]);
  });

  it('heldFor gives the first held result of a sender, in announce order', () => {
    const store = new ResultsStore();
    const first = held(3, 4, 7, 1);
    const second = held(3, 4, 7, 2);
    store.addCandidate(3, { start: 4, end: 7 }, first.commitment, aliceId);
    store.hold(second);
    // The first announced is not held yet: the second (held) is what this client can vouch for.
    expect(store.heldFor(3, { start: 4, end: 7 }, aliceId)).toBe(second);
    store.hold(first);
    expect(store.heldFor(3, { start: 4, end: 7 }, aliceId)).toBe(first);
    expect(store.heldFor(3, { start: 4, end: 7 }, 'bob')).toBeUndefined();
    expect(store.get(first.commitment)).toBe(first);
  });

  it('forgetBefore drops held results and candidates of earlier steps only', () => {
    const store = new ResultsStore();
    for (const step of [1, 2, 3, 4]) store.hold(held(step, 0, 1));
    store.addCandidate(9, { start: 0, end: 1 }, new Uint8Array(32).fill(9), aliceId);
    store.forgetBefore(3);
    expect(store.size).toEqual({ held: 2, steps: 3 });
    expect(store.commitmentsFor(2, { start: 0, end: 1 }, aliceId)).toEqual([]);
    expect(store.commitmentsFor(3, { start: 0, end: 1 }, aliceId)).toHaveLength(1);
    expect(store.commitmentsFor(9, { start: 0, end: 1 }, aliceId)).toHaveLength(1);
    expect(store.has(held(1, 0, 1).commitment)).toBe(false);
  });
});

describe('ResultFetcher', () => {
  it('uses the documented defaults unless told otherwise', () => {
    expect(fetcher().f.timings).toEqual({
      patienceMs: FETCH_PATIENCE_MS,
      retryDelayMs: FETCH_RETRY_DELAY_MS,
      backgroundAttempts: ANNOUNCE_FETCH_ATTEMPTS,
      backgroundBackoffMs: ANNOUNCE_FETCH_BACKOFF_MS,
    });
    expect(fetcher({ timings: { patienceMs: 300 } }).f.timings.patienceMs).toBe(300);
  });

  it('returns a held result without asking anyone', async () => {
    let asked = 0;
    const store = new ResultsStore();
    const h = held(2, 0, 1);
    store.hold(h);
    const { f } = fetcher({
      store,
      link: {
        fetchResult: async () => {
          asked++;
          return null;
        },
      },
    });
    expect(await f.obtain(h.commitment, aliceId)).toBe(h);
    expect(asked).toBe(0);
  });

  it('asks peers first, refuses a frame that is not the commitment, then takes the relay copy', async () => {
    const want = signed(4, 2, 3);
    const other = signed(4, 2, 3, 7);
    const order: string[] = [];
    const { f, stats, store } = fetcher({
      peers: {
        fetch: async (_c, hints) => {
          order.push(`peer ${hints.join(',')}`);
          return other.trainingFrame; // a real frame, but for another commitment
        },
      },
      link: {
        fetchResult: async () => {
          order.push('relay');
          return want.frame;
        },
      },
    });
    const got = await f.obtain(want.commitment, aliceId);
    expect(order).toEqual([`peer ${aliceId}`, 'relay']);
    expect(got?.result).toEqual(want.result);
    expect(got?.from).toBe(aliceId);
    expect(store.has(want.commitment)).toBe(true);
    expect(store.has(other.commitment)).toBe(false);
    expect(stats).toEqual({ bytesReceived: want.frame.length, bytesFromPeers: 0 });
  });

  it('counts a peer frame that hashes to the commitment as bytes from peers', async () => {
    const want = signed(4, 2, 3);
    const { f, stats } = fetcher({ peers: { fetch: async () => want.trainingFrame } });
    const got = await f.obtain(want.commitment, aliceId);
    expect(got?.result).toEqual(want.result);
    expect(stats).toEqual({
      bytesReceived: want.trainingFrame.length,
      bytesFromPeers: want.trainingFrame.length,
    });
  });

  it('retries with its pause until the patience deadline, then gives up', async () => {
    let tries = 0;
    const { f, clock } = fetcher({
      link: {
        fetchResult: async () => {
          tries++;
          throw new Error('relay unreachable');
        },
      },
      timings: { patienceMs: 1000, retryDelayMs: 250 },
    });
    expect(await f.obtain(signed(1, 0, 0).commitment, aliceId)).toBeNull();
    // Tries at 0, 250, 500, 750 and 1000 ms; the deadline is reached at the fifth.
    expect(tries).toBe(5);
    expect(clock.t.sleeps).toEqual([250, 250, 250, 250]);
    expect(clock.t.now).toBe(1000);
  });

  it('gets a result that shows up before the deadline', async () => {
    const want = signed(1, 0, 0);
    let tries = 0;
    const { f, clock } = fetcher({
      link: { fetchResult: async () => (++tries === 3 ? want.frame : null) },
    });
    expect((await f.obtain(want.commitment, aliceId))?.result).toEqual(want.result);
    expect(clock.t.sleeps).toEqual([FETCH_RETRY_DELAY_MS, FETCH_RETRY_DELAY_MS]);
  });

  it('refuses SignedResults with a bad signature, for another run, or for another commitment', () => {
    const { f, store } = fetcher();
    const good = signed(1, 0, 0);
    const tampered = Uint8Array.from(good.frame);
    tampered[40] = (tampered[40] as number) ^ 1; // inside the commitment field
    expect(f.acceptSigned(tampered)).toBeNull();
    expect(f.acceptSigned(signed(1, 0, 0, 1, 'other-run').frame)).toBeNull();
    expect(f.acceptSigned(good.frame, signed(1, 0, 0, 2).commitment)).toBeNull();
    expect(store.size.held).toBe(0);
    expect(f.acceptSigned(good.frame)?.from).toBe(aliceId);
    expect(store.commitmentsFor(1, { start: 0, end: 0 }, aliceId)).toEqual([good.commitment]);
  });

  it('prefetches in the background with doubling backoff, once per commitment', async () => {
    let tries = 0;
    let settled = 0;
    const { f, clock } = fetcher({
      link: {
        fetchResult: async () => {
          tries++;
          return null;
        },
      },
      onSettled: () => settled++,
    });
    const c = signed(1, 0, 0).commitment;
    f.prefetch(c, aliceId);
    f.prefetch(c, aliceId); // already under way: no second fetch
    await waitFor(() => settled === 1);
    expect(tries).toBe(ANNOUNCE_FETCH_ATTEMPTS);
    // No pause after the last try: giving up is immediate.
    expect(clock.t.sleeps).toEqual(
      Array.from({ length: ANNOUNCE_FETCH_ATTEMPTS - 1 }, (_, i) => ANNOUNCE_FETCH_BACKOFF_MS * 2 ** i),
    );
    // Once settled, a new announce of it may start a new fetch.
    f.prefetch(c, aliceId);
    await waitFor(() => settled === 2);
    expect(tries).toBe(2 * ANNOUNCE_FETCH_ATTEMPTS);
  });

  it('does not prefetch a held result, and stops as soon as it has one', async () => {
    const want = signed(1, 0, 0);
    let tries = 0;
    let settled = 0;
    const { f, store } = fetcher({
      link: { fetchResult: async () => (++tries === 2 ? want.frame : null) },
      onSettled: () => settled++,
    });
    f.prefetch(want.commitment, aliceId);
    await waitFor(() => settled === 1);
    expect(store.has(want.commitment)).toBe(true);
    expect(tries).toBe(2);
    f.prefetch(want.commitment, aliceId);
    expect(settled).toBe(1);
    expect(tries).toBe(2);
  });
});

/** Lets background work run (it never waits on real time here) until `done()`. */
async function waitFor(done: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !done(); i++) await new Promise((r) => setImmediate(r));
  expect(done()).toBe(true);
}
