// The pure parts of bench:quality (bench/lib): what a peer sent per token and against fp32 gradients, the
// data order AdamW trains (exactly the union of what the peers trained, step by step, as core's assignment
// hands it out, read through the peers' sample order), the default settings being the embedded default run,
// and the virtual clock.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assignBatches, DISTRO_RUN_TOML, parseRunConfig, type BatchId } from '@meshtrain/core';
import { ByteTokenizer, corpusOrder } from '@meshtrain/model';
import { prepareShards } from '@meshtrain/model/node';
import { describe, expect, it } from 'vitest';
import { batchOrderOf } from '../../../bench/lib/adamw-run.ts';
import {
  bytesPerToken,
  fp32Ratio,
  globalBatches,
  peerTraffic,
  plannedBatches,
  sameBatches,
} from '../../../bench/lib/quality-accounting.ts';
import { baseRunFor, parseQualityFlags, withPeakLr } from '../../../bench/lib/quality-config.ts';
import { VirtualClock } from '../../../bench/lib/virtual-time.ts';
import { localDataSource } from '../src/net/local-data.ts';

const RAMP = {
  global_batch_size_start: 64,
  global_batch_size_end: 64,
  global_batch_size_warmup_tokens: 0,
  max_seq_len: 128,
};

/** What each of `trainers` trains in `rounds` rounds, as core's data assignment hands it out. */
function assigned(trainers: string[], rounds: number, batch: number) {
  const out: { peer: string; step: number; batch: BatchId }[] = [];
  for (let r = 0; r < rounds; r++) {
    const seed = ((r + 1) * 2654435761).toString(16).padStart(16, '0');
    for (const a of assignBatches(trainers, seed, r * batch, batch))
      out.push({ peer: a.trainer, step: r + 1, batch: a.batch });
  }
  return out;
}

describe('bench:quality accounting', () => {
  it('bytes per token and the ratio to fp32 gradients', () => {
    expect(bytesPerToken(5112, 2048)).toBeCloseTo(2.49609375, 12);
    // 4 bytes × 1,082,496 parameters for each of 3 steps, over 15,336 bytes sent.
    expect(fp32Ratio(1_082_496, 3, 15_336)).toBeCloseTo((4 * 1_082_496 * 3) / 15_336, 9);
    const t = peerTraffic(
      [
        { step: 1, batch: { start: 0, end: 15 }, bytes: 5112, innerSteps: 1 },
        { step: 2, batch: { start: 64, end: 79 }, bytes: 5112, innerSteps: 1 },
        { step: 3, batch: { start: 128, end: 144 }, bytes: 5200, innerSteps: 1 },
      ],
      128,
      1_082_496,
    );
    expect(t).toEqual({
      results: 3,
      optimizer_steps: 3,
      tokens: (16 + 16 + 17) * 128,
      bytes_sent: 15_424,
      bytes_per_token: 15_424 / (49 * 128),
      ratio_vs_fp32: (4 * 1_082_496 * 3) / 15_424,
    });
    expect(() => fp32Ratio(10, 1, 0)).toThrow(RangeError);
    expect(() => bytesPerToken(10, 0)).toThrow(RangeError);
  });

  it('AdamW trains exactly the union of what the peers trained, step by step', () => {
    const trained = assigned(['a', 'b', 'c', 'd'], 5, 64);
    // Every peer got a share, and shares move between peers from round to round.
    expect(new Set(trained.map((t) => t.peer)).size).toBe(4);
    const firstOfA = trained.filter((t) => t.peer === 'a').map((t) => t.batch.start % 64);
    expect(new Set(firstOfA).size).toBeGreaterThan(1);

    const order = globalBatches([...trained].reverse());
    expect(order).toEqual(plannedBatches(RAMP, 5));
    expect(order[2]).toEqual(Array.from({ length: 64 }, (_, i) => 128 + i));

    // What AdamW's train step is given at each step is that union, folded onto the split like the peers' data.
    const split = corpusOrder(150);
    const adamw = batchOrderOf({ kind: 'batches', batches: order, order: split });
    for (let s = 0; s < 5; s++) {
      const peers = trained
        .filter((t) => t.step === s + 1)
        .flatMap((t) => Array.from({ length: t.batch.end - t.batch.start + 1 }, (_, i) => t.batch.start + i));
      expect([...adamw(s)].sort((x, y) => x - y)).toEqual(peers.map((id) => id % 150).sort((x, y) => x - y));
    }
    expect(adamw(2).slice(0, 3)).toEqual([128, 129, 130]);
    expect(adamw(2)[30]).toBe(8); // sample 158 of the run is sample 8 of a 150-sample split
    expect(() => adamw(5)).toThrow(RangeError);
  });

  it("in the default run's seeded order, AdamW reads exactly the samples the peers' data source serves", async () => {
    const root = await mkdtemp(join(tmpdir(), 'meshtrain-quality-order-'));
    try {
      const docs = Array.from({ length: 12 }, (_, d) => {
        const text = Array.from({ length: 400 }, (_, i) =>
          String.fromCharCode(97 + ((i * 7 + d * 5) % 26)),
        ).join('');
        return { id: `d${d}`, bytes: text.length, load: () => text };
      });
      const dir = join(root, 'data');
      await prepareShards(docs, dir, {
        tokenizer: new ByteTokenizer(),
        tokenBytes: 2,
        valFraction: 0.2,
        source: 'test',
      });
      const run = baseRunFor(parseQualityFlags(['--seq-len', '16', '--batch-size', '32', '--steps', '12']));
      // What bench:quality builds: the peers' source in the run's order, AdamW through that same order.
      const data = await localDataSource(dir, 16, run.model.LLM.data_location);
      expect(data.order.kind).toBe('seeded');
      const n = data.order.size;
      const steps = Math.ceil((2 * n) / 32) + 1; // past the end of the split: into the second pass
      const batches = plannedBatches(
        { ...RAMP, global_batch_size_start: 32, global_batch_size_end: 32 },
        steps,
      );
      const adamw = batchOrderOf({ kind: 'batches', batches, order: data.order });
      for (let s = 0; s < steps; s++) {
        const ids = batches[s]!;
        const peers = await data.samples(ids[0]!, ids.at(-1)!);
        expect([...data.dataset.train.batch(adamw(s))], `step ${s}`).toEqual([...peers]);
      }
      // Each pass reads every sample once, in an order that is neither the corpus's nor the last pass's.
      const all = batches.flat();
      const pass = (p: number) => all.filter((id) => Math.floor(id / n) === p).map((id) => data.order.at(id));
      const first = pass(0);
      expect([...first].sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_, j) => j));
      expect(first).not.toEqual(Array.from({ length: n }, (_, j) => j));
      expect(pass(1).slice(0, 20)).not.toEqual(first.slice(0, 20));
      // --data-order corpus reproduces the earlier figures' order.
      const corpusRun = baseRunFor(parseQualityFlags(['--seq-len', '16', '--data-order', 'corpus']));
      const corpus = await localDataSource(dir, 16, corpusRun.model.LLM.data_location);
      expect([n + 3, 5].map((id) => corpus.order.at(id))).toEqual([3, 5]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it('a retried batch changes the order, and the plan check says so', () => {
    const trained = assigned(['a', 'b', 'c', 'd'], 3, 64);
    // Round 2's batch of one trainer was not attested and was trained again in round 3 instead.
    const moved = trained.find((t) => t.step === 2) as (typeof trained)[number];
    moved.step = 3;
    const order = globalBatches(trained);
    expect(order.map((b) => b.length)).toEqual([64, 64 - 16, 64 + 16]);
    expect(sameBatches(order, plannedBatches(RAMP, 3))).toBe(false);
    expect(() => globalBatches([...trained, { peer: 'e', step: 1, batch: { start: 3, end: 3 } }])).toThrow(
      /trained twice/,
    );
  });

  it('the default settings are the default run’s DisTrO variant, and --lr keeps the schedule shape', () => {
    const flags = parseQualityFlags([]);
    expect(flags).toMatchObject({ preset: 'tiny', peers: 4, steps: 300, batchSize: 64, seqLen: 128 });
    expect(baseRunFor(flags)).toEqual(parseRunConfig(DISTRO_RUN_TOML).config);
    const run = withPeakLr(baseRunFor(flags), 3e-3);
    const cosine = (
      run.model.LLM.lr_schedule as { Cosine: { base_lr: number; final_lr: number; warmup_steps: number } }
    ).Cosine;
    expect(cosine.base_lr).toBeCloseTo(3e-3, 15);
    expect(cosine.final_lr).toBeCloseTo(3e-4, 15);
    expect(cosine.warmup_steps).toBe(20);
    const short = baseRunFor(parseQualityFlags(['--steps', '12', '--preset', 'micro', '--seq-len', '32']));
    expect(short.config.total_steps).toBe(12);
    expect(short.model.LLM.lr_schedule).toMatchObject({ Cosine: { total_steps: 12, warmup_steps: 12 } });
    expect(() => parseQualityFlags(['--bits', '2'])).toThrow(/--bits/);
    expect(() => parseQualityFlags(['--data-order', 'random'])).toThrow(/--data-order/);
    const relay = (f: string[]) =>
      (baseRunFor(parseQualityFlags(f)).model.LLM.data_location as { Relay: { shuffle: unknown } }).Relay;
    expect(relay([]).shuffle).toMatchObject({ Seeded: expect.any(Array) });
    expect(relay(['--data-order', 'seeded'])).toEqual(relay([]));
    expect(relay(['--data-order', 'corpus']).shuffle).toBe('DontShuffle');
    const unverified = baseRunFor(parseQualityFlags(['--verification-percent', '0']));
    expect(unverified.config.verification_percent).toBe(0);
    expect({ ...unverified.config, verification_percent: 7 }).toEqual({
      ...baseRunFor(flags).config,
      verification_percent: 7,
    });
  });

  it('virtual time fires timers in order and ticks the coordinator once per second', async () => {
    const hub = {
      now: 1000,
      ticks: 0,
      advance(s: number) {
        this.now += s;
        this.ticks += s;
      },
    };
    const clock = new VirtualClock(hub as never);
    const fired: string[] = [];
    void clock.sleep(1500).then(() => fired.push('1500'));
    void clock.sleep(200).then(() => fired.push('200'));
    void clock.sleep(0).then(() => fired.push('0'));
    const flush = () => new Promise<void>((r) => setImmediate(r));
    clock.advance(); // fires the one already due, time stands still
    await flush();
    expect([fired, clock.now(), hub.ticks]).toEqual([['0'], 1_000_000, 0]);
    clock.advance(); // to 200 ms
    clock.advance(); // to the next second: one tick
    await flush();
    expect([fired, clock.now(), hub.ticks]).toEqual([['0', '200'], 1_001_000, 1]);
    clock.advance(); // to 1500 ms
    await flush();
    expect([fired, clock.now(), hub.ticks, hub.now]).toEqual([['0', '200', '1500'], 1_001_500, 1, 1001]);
  });
});
