// A SparseLoCo run on the real relay (Hono, ws, SQLite in memory): its rounds hand out H × the per-step batch,
// and the relay admits exactly the results core's runResultSpec describes — n-bit values of the run's width,
// top-k of every chunk — refusing other widths, DisTrO's signs and a wrong k before storing anything.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  currentRound,
  encodeParamHash,
  encodeWarmupWitness,
  quantLevels,
  roundAssignments,
  type DistroResult,
  type ResultSpec,
  type TrainingResult,
} from '@meshtrain/core';
import { startRelayServer, type RunningRelay } from '../src/server.ts';
import { resultSpecForToml } from '../src/run-host.ts';
import { fastRunToml, hexKey, identity, resultFrames, TestClient } from './helpers/relay-fixtures.ts';

let relay: RunningRelay;
let now = 1_800_000_000_000;
const RUN = 'sparse';
const H = 4;
const TOML = fastRunToml(RUN, { max_round_train_time: 60 }).replace(
  /\[model\.LLM\.optimizer\.Distro\][^[]*/,
  `[model.LLM.optimizer.SparseLoCo]\ninner_steps = ${H}\ncompression_topk = 32\nquantization_bits = 2\n\n`,
);
const SPEC = resultSpecForToml(TOML) as ResultSpec;
const open: TestClient[] = [];

async function advance(ms: number): Promise<void> {
  now += ms;
  await new Promise((r) => setTimeout(r, 120));
}

/** A result of the spec's shape: `perChunk` entries per chunk (default k), `bits`-bit codes. */
function quantResult(
  step: number,
  batch: { start: number; end: number },
  bits = 2,
  perChunk?: number,
): TrainingResult {
  const tensors: DistroResult[] = SPEC.tensors.map((t) => {
    const chunks = t.xshape.reduce((a, b) => a * b, 1) / t.totalk;
    const k = perChunk ?? t.k;
    const n = chunks * k;
    const indices = t.totalk <= 256 ? new Uint8Array(n) : new Uint16Array(n);
    for (let i = 0; i < n; i++) indices[i] = i % k;
    const codes = new Uint8Array(Math.ceil((n * bits) / 8));
    for (let i = 0; i < codes.length; i++) codes[i] = (i * 37 + step) & 0xff;
    // Pad bits must be zero: the wire refuses another spelling of the same codes.
    const used = (n * bits) % 8;
    if (used) codes[codes.length - 1]! &= (1 << used) - 1;
    const scales = new Float32Array(chunks * quantLevels(bits)).map((_, i) => 1e-3 * (1 + (i % 3)));
    return {
      xshape: [...t.xshape],
      totalk: t.totalk,
      indices,
      values: { kind: 'quant', bits, scales, codes },
    };
  });
  return {
    runId: RUN,
    step,
    batch,
    trainerNonce: step,
    fingerprint: new Uint8Array(SPEC.fingerprintBytes).fill(step & 0xff),
    tensors,
  };
}

beforeAll(async () => {
  relay = await startRelayServer({ dataDir: ':memory:', tickMs: 20, graceMs: 200, clock: () => now });
  relay.relay.createRun({ toml: TOML, mainAuthority: hexKey(identity(1)) });
});

afterAll(async () => {
  for (const c of open) c.close();
  await relay.close();
});

describe('a SparseLoCo run on the relay', () => {
  it('hands out H × the batch per round and admits only results of the run shape and width', async () => {
    expect(SPEC.valueKind).toBe('quant');
    expect(SPEC.bits).toBe(2);
    const clients = await Promise.all([
      TestClient.joined(relay.url, RUN, identity(50)),
      TestClient.joined(relay.url, RUN, identity(51)),
    ]);
    open.push(...clients);
    await advance(2000);
    await clients[0]!.until(() => clients[0]!.state?.run_state === 'Warmup', 5000, 'Warmup');
    for (const c of clients)
      expect((await c.request(encodeWarmupWitness({ runId: RUN, epoch: 0 }))).kind).toBe('ack');
    await clients[0]!.until(() => clients[0]!.state?.run_state === 'RoundTrain', 5000, 'RoundTrain');
    const s = clients[0]!.state!;
    const round = currentRound(s)!;
    // fastRunToml's global batch is 4 sequences per inner step.
    expect(round.batch_size).toBe(H * 4);
    const byId = new Map(clients.map((c) => [hexKey(c.id), c]));
    const mine = roundAssignments(s, round).find((a) => byId.has(a.id))!;
    const me = byId.get(mine.id)!;
    let tag = 1000;
    // A harmless frame between refusals keeps "three bad frames in a row" from closing the connection.
    const good = async () =>
      expect(
        await me.request(encodeParamHash({ runId: RUN, epoch: tag++, step: 1, hash: new Uint8Array(32) })),
      ).toMatchObject({ kind: 'error', message: { code: 'stale' } });
    const refused = async (r: TrainingResult, why: RegExp) => {
      const reply = await me.request(resultFrames(me.id, r).signed);
      expect(reply).toMatchObject({ kind: 'error', message: { code: 'bad_result' } });
      expect(JSON.stringify(reply)).toMatch(why);
      await good();
    };
    const fits = quantResult(round.step, mine.batch);
    await refused(quantResult(round.step, mine.batch, 3), /3-bit codes, the run sends 2-bit/);
    await refused(quantResult(round.step, mine.batch, 2, 2), /entries per chunk/);
    await refused(
      {
        ...fits,
        tensors: fits.tensors.map((t) => ({
          ...t,
          values: {
            kind: 'sign' as const,
            bits: new Uint8Array(Math.ceil(t.indices.length / 8)),
            count: t.indices.length,
          },
        })),
      },
      /sign values, the run sends quant/,
    );
    const honest = resultFrames(me.id, fits);
    expect((await me.request(honest.signed)).kind).toBe('ack');
    expect(relay.relay.store.rounds.result(RUN, honest.commitment)).toBeDefined();
  }, 30_000);
});
