// SparseLoCo in core: the `[model.LLM.optimizer.SparseLoCo]` table (defaults, bounds, cross-key rules), what
// the coordinator makes of H inner steps per round (round batch, data index, assignments covering H × the
// per-step batch), the inner batches and schedule steps every peer derives alike, and the result shape a
// host admits (n-bit values of exactly the run's width).
import { describe, expect, it } from 'vitest';
import {
  checkResultShape,
  coordinatorConfigOf,
  createCoordinator,
  currentRound,
  DISTRO_RUN_TOML,
  encodeSignedResult,
  innerBatches,
  innerScheduleStep,
  innerStepsOf,
  maxSignedResultBytes,
  parseRunConfig,
  quantLevels,
  roundAssignments,
  roundBatchSize,
  runResultSpec,
  RunConfigError,
  signResult,
  SPARSELOCO_DEFAULTS,
  stringifyRunConfig,
  tick,
  type ConfigIssue,
  type CoordinatorEvent,
  type CoordinatorState,
  type DistroResult,
  type Optimizer,
  type ResultSpec,
  type TrainingResult,
  verificationPasses,
} from '../src/index.ts';
import { clientId, honestWitnessEvents } from '../../../bench/lib/honest-client.ts';
import { baseConfig } from './fixtures/coordinator.ts';
import { testIdentity } from './fixtures/wire.ts';
import { checkCoordinatorConfig } from '../src/coordinator/config-check.ts';
import { dataIndexForStep, globalBatchSize } from '../src/selection/batch-size.ts';

const DISTRO_TABLE = /\[model\.LLM\.optimizer\.Distro\][^[]*/;

/** The default run with its optimizer table replaced by `[model.LLM.optimizer.SparseLoCo]` + `body`. */
function sparseRun(body: string): string {
  expect(DISTRO_RUN_TOML).toMatch(DISTRO_TABLE);
  return DISTRO_RUN_TOML.replace(DISTRO_TABLE, `[model.LLM.optimizer.SparseLoCo]\n${body}\n\n`);
}

function issues(toml: string): ConfigIssue[] {
  try {
    parseRunConfig(toml);
  } catch (err) {
    if (err instanceof RunConfigError) return [...err.issues];
    throw err;
  }
  throw new Error('expected the config to be rejected');
}

describe('[model.LLM.optimizer.SparseLoCo]', () => {
  it('an empty table takes every default, says so in one note, and maps H onto the coordinator', () => {
    const parsed = parseRunConfig(sparseRun(''));
    const opt = parsed.config.model.LLM.optimizer;
    expect(opt).toEqual({ SparseLoCo: SPARSELOCO_DEFAULTS });
    const note = parsed.notes.find((n) => n.path === 'model.LLM.optimizer.SparseLoCo');
    expect(note?.reason).toMatch(/inner_steps = 10, betas = \[0\.9,0\.95\],.* domain = "raw", outer_lr = 1$/);
    expect(parsed.unsupported).toEqual([]);
    expect(parsed.summary).toContain('SparseLoCo H=10 chunk 64 top-64 2-bit raw');
    expect(innerStepsOf(opt)).toBe(10);
    expect(coordinatorConfigOf(parsed.config).inner_steps).toBe(10);
    // A DisTrO run's coordinator config is what it was: no inner_steps key.
    const distro = parseRunConfig(DISTRO_RUN_TOML).config;
    expect('inner_steps' in coordinatorConfigOf(distro)).toBe(false);
    expect(innerStepsOf(distro.model.LLM.optimizer)).toBe(1);
  });

  it('keeps every given key, notes none, and writes back to an equal run', () => {
    const body = [
      'inner_steps = 4',
      'betas = [0.8, 0.99]',
      'eps = 1e-6',
      'weight_decay = 0.05',
      'clip_grad_norm = 0.0',
      'error_decay = 0.9',
      'compression_topk = 32',
      'compression_chunk = 32',
      'quantization_bits = 3',
      'domain = "dct"',
      'outer_lr = 0.7',
    ].join('\n');
    const parsed = parseRunConfig(sparseRun(body));
    const want: Optimizer = {
      SparseLoCo: {
        inner_steps: 4,
        betas: [0.8, 0.99],
        eps: 1e-6,
        weight_decay: 0.05,
        clip_grad_norm: 0,
        error_decay: 0.9,
        compression_topk: 32,
        compression_chunk: 32,
        quantization_bits: 3,
        domain: 'dct',
        outer_lr: 0.7,
      },
    };
    expect(parsed.config.model.LLM.optimizer).toEqual(want);
    expect(parsed.notes.filter((n) => n.path.includes('optimizer'))).toEqual([]);
    expect(parseRunConfig(stringifyRunConfig(parsed.config)).config).toEqual(parsed.config);
    // Defaulted tables write back complete too.
    const defaulted = parseRunConfig(sparseRun('inner_steps = 2')).config;
    expect(parseRunConfig(stringifyRunConfig(defaulted)).config).toEqual(defaulted);
  });

  const bad: Array<[string, string, RegExp]> = [
    ['inner_steps = 0', 'inner_steps', /1/],
    ['inner_steps = 1025', 'inner_steps', /1024/],
    ['inner_steps = 2.5', 'inner_steps', /integer/],
    ['quantization_bits = 0', 'quantization_bits', /1/],
    ['quantization_bits = 9', 'quantization_bits', /8/],
    ['domain = "fft"', 'domain', /raw|dct/],
    ['compression_chunk = 257', 'compression_chunk', /256/],
    ['compression_topk = 0', 'compression_topk', /1/],
    ['error_decay = 1.5', 'error_decay', /1/],
    ['betas = [0.9, 1.0]', 'betas[1]', /1/],
    ['outer_lr = 0.0', 'outer_lr', /0/],
    ['eps = -1e-8', 'eps', /0/],
  ];
  for (const [line, key, message] of bad)
    it(`refuses ${line} at its key`, () => {
      const found = issues(sparseRun(line));
      const at = found.find((i) => i.path === `model.LLM.optimizer.SparseLoCo.${key}`);
      expect(at, JSON.stringify(found)).toBeDefined();
      expect(at?.message).toMatch(message);
    });

  it('topk may be at most chunk² (a chunk has that many entries)', () => {
    expect(parseRunConfig(sparseRun('compression_chunk = 8\ncompression_topk = 64')).config).toBeDefined();
    expect(issues(sparseRun('compression_chunk = 8\ncompression_topk = 65'))).toEqual([
      {
        path: 'model.LLM.optimizer.SparseLoCo.compression_topk',
        message:
          'must be <= model.LLM.optimizer.SparseLoCo.compression_chunk² (65 > 8² = 64): a chunk has at most chunk² entries',
      },
    ]);
  });

  it("weight decay × the schedule's largest lr must stay <= 1 (AdamW would flip signs)", () => {
    const found = issues(sparseRun('weight_decay = 2000'));
    expect(found.map((i) => i.path)).toEqual(['model.LLM.optimizer.SparseLoCo.weight_decay']);
    expect(found[0]?.message).toMatch(/2000 × 0\.001 > 1/);
  });

  it('unknown keys are errors with a suggestion; a bad key does not hide a cross-key rule', () => {
    const found = issues(sparseRun('inner_step = 3'));
    expect(found[0]?.path).toBe('model.LLM.optimizer.SparseLoCo.inner_step');
    expect(found[0]?.message).toMatch(/inner_steps/);
    const two = issues(
      sparseRun('compression_chunk = 2\ncompression_topk = 5').replace(
        'total_steps = 300',
        'total_steps = -1',
      ),
    );
    expect(two.map((i) => i.path).sort()).toEqual([
      'config.total_steps',
      'model.LLM.optimizer.SparseLoCo.compression_topk',
    ]);
  });

  it('the coordinator refuses an inner_steps outside 1..1024', () => {
    expect(checkCoordinatorConfig({ ...baseConfig, inner_steps: 4 })).toEqual([]);
    expect(checkCoordinatorConfig({ ...baseConfig, inner_steps: 0 })[0]).toMatch(/inner_steps/);
    expect(checkCoordinatorConfig({ ...baseConfig, inner_steps: 1025 })[0]).toMatch(/inner_steps/);
  });
});

describe('rounds of H inner steps', () => {
  const ramp = {
    global_batch_size_start: 4,
    global_batch_size_end: 8,
    global_batch_size_warmup_tokens: 1600,
    max_seq_len: 16,
  };

  it('a round reads H ramped batches; the data index of a step counts them', () => {
    const h4 = { ...ramp, inner_steps: 4 };
    expect(roundBatchSize(ramp, 0)).toBe(globalBatchSize(ramp, 0));
    expect(roundBatchSize(h4, 0)).toBe(4 * 4);
    expect(dataIndexForStep(h4, 2)).toBe(16);
    // The ramp is read at the round's first sample: 16 samples = 256 tokens in → 4 + 4·256/1600 → 5.
    expect(roundBatchSize(h4, 16)).toBe(4 * globalBatchSize(ramp, 16));
    expect(dataIndexForStep(h4, 3)).toBe(16 + 4 * globalBatchSize(ramp, 16));
  });

  it('inner batches are consecutive, cover the interval exactly and differ in size by at most one', () => {
    for (const [start, n, h] of [
      [0, 16, 4],
      [100, 10, 3],
      [7, 3, 5],
      [5, 1, 1],
      [9, 64, 64],
    ] as const) {
      const parts = innerBatches({ start, end: start + n - 1 }, h);
      expect(parts.length).toBe(Math.min(h, n));
      expect(parts[0]?.start).toBe(start);
      expect(parts.at(-1)?.end).toBe(start + n - 1);
      for (let i = 1; i < parts.length; i++) expect(parts[i]!.start).toBe(parts[i - 1]!.end + 1);
      const sizes = parts.map((p) => p.end - p.start + 1);
      expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
      expect([...sizes].sort((a, b) => b - a)).toEqual(sizes);
    }
    expect(innerBatches({ start: 3, end: 2 }, 4)).toEqual([]);
    expect(() => innerBatches({ start: 0, end: 3 }, 0)).toThrow(RangeError);
  });

  it('the schedule counts inner steps: round step s, inner step h → (s − 1)·H + h + 1', () => {
    expect(innerScheduleStep(1, 0, 10)).toBe(1);
    expect(innerScheduleStep(1, 9, 10)).toBe(10);
    expect(innerScheduleStep(2, 0, 10)).toBe(11);
    expect(innerScheduleStep(7, 0, 1)).toBe(7);
  });

  it('the coordinator hands out H × the batch per round, split among its trainers, and advances by it', () => {
    let s: CoordinatorState = createCoordinator({
      run_id: 'run',
      run_seed: 'cd'.repeat(32),
      config: {
        ...baseConfig,
        inner_steps: 5,
        global_batch_size_start: 6,
        global_batch_size_end: 6,
      },
      now: 1000,
    });
    let now = 1000;
    const send = (e: CoordinatorEvent) => {
      const r = tick(s, e, now);
      if (r.error) throw r.error;
      s = r.state;
    };
    for (let i = 0; i < 3; i++) send({ type: 'join', id: clientId(i), p2p_id: `p${i}` });
    now += 3;
    send({ type: 'tick' });
    for (const c of s.epoch.clients) if (s.run_state === 'Warmup') send({ type: 'warmup_witness', id: c.id });
    const seen: { data_index: number; batch_size: number }[] = [];
    while (s.run_state === 'RoundTrain' && seen.length < 3) {
      const round = currentRound(s)!;
      seen.push({ data_index: round.data_index, batch_size: round.batch_size });
      const batches = roundAssignments(s, round).map((a) => a.batch);
      expect(batches.reduce((n, b) => n + b.end - b.start + 1, 0)).toBe(30);
      // Each trainer's interval is its H inner batches: 10 samples each here, 5 inner batches of 2.
      for (const b of batches)
        expect(innerBatches(b, 5).map((p) => p.end - p.start + 1)).toEqual([2, 2, 2, 2, 2]);
      for (const e of honestWitnessEvents(s)) send(e);
      now += 1;
      send({ type: 'tick' });
    }
    // 30 = H × 6 samples per round, the next round starting where the last one's end.
    expect(seen).toEqual([
      { data_index: 0, batch_size: 30 },
      { data_index: 30, batch_size: 30 },
      { data_index: 60, batch_size: 30 },
    ]);
  });
});

describe('SparseLoCo result shape', () => {
  const PARAMS = [
    { name: 'b.weight', shape: [4, 6] },
    { name: 'a.norm', shape: [10] },
  ];
  const sparse = (bits: number): Optimizer => ({
    SparseLoCo: {
      ...SPARSELOCO_DEFAULTS,
      compression_chunk: 4,
      compression_topk: 2,
      quantization_bits: bits,
    },
  });
  const SPEC = runResultSpec(PARAMS, sparse(2), 10) as ResultSpec;

  function quantTensors(spec: ResultSpec, bits: number): DistroResult[] {
    return spec.tensors.map((t) => {
      const chunks = t.xshape.reduce((a, b) => a * b, 1) / t.totalk;
      const n = chunks * t.k;
      return {
        xshape: [...t.xshape],
        totalk: t.totalk,
        indices: new Uint8Array(n).map((_, i) => i % t.k),
        values: {
          kind: 'quant',
          bits,
          scales: new Float32Array(chunks * quantLevels(bits)).fill(0.5),
          codes: new Uint8Array(Math.ceil((n * bits) / 8)),
        },
      };
    });
  }
  const result = (tensors: DistroResult[], fingerprint = true): TrainingResult => ({
    runId: 'run',
    step: 1,
    batch: { start: 0, end: 9 },
    trainerNonce: 1,
    tensors,
    ...(fingerprint ? { fingerprint: new Uint8Array(256) } : {}),
  });

  it('names quant values of the run bits; DisTrO runs keep theirs; AdamW has none', () => {
    expect(SPEC.valueKind).toBe('quant');
    expect(SPEC.bits).toBe(2);
    expect(SPEC.fingerprintBytes).toBe(256);
    expect(SPEC.tensors.map((t) => t.k)).toEqual([2, 2]);
    const distro = runResultSpec(PARAMS, parseRunConfig(DISTRO_RUN_TOML).config.model.LLM.optimizer);
    expect(distro?.valueKind).toBe('sign');
    expect(runResultSpec(PARAMS, { AdamW: { betas: [0.9, 0.9], weight_decay: 0, eps: 1e-8 } })).toBeNull();
  });

  it('admits a result of the run width and refuses other widths, other kinds and missing fingerprints', () => {
    expect(checkResultShape(result(quantTensors(SPEC, 2)), SPEC)).toBeNull();
    expect(checkResultShape(result(quantTensors(SPEC, 3)), SPEC)?.message).toMatch(
      /3-bit codes, the run sends 2-bit/,
    );
    const signs = quantTensors(SPEC, 2).map((t) => ({
      ...t,
      values: { kind: 'sign' as const, bits: new Uint8Array(1), count: t.indices.length },
    }));
    expect(checkResultShape(result(signs), SPEC)?.message).toMatch(/sign values, the run sends quant/);
    expect(checkResultShape(result(quantTensors(SPEC, 2), false), SPEC)?.message).toMatch(/fingerprint/);
  });

  it('bounds the frame of any fitting result at the run width', () => {
    for (const bits of [1, 2, 8]) {
      const spec = runResultSpec(PARAMS, sparse(bits), 10) as ResultSpec;
      const r: TrainingResult = {
        ...result(quantTensors(spec, bits)),
        runId: 'r'.repeat(64),
        step: 0xffff_ffff,
        batch: { start: Number.MAX_SAFE_INTEGER - 1, end: Number.MAX_SAFE_INTEGER },
        trainerNonce: 0xffff_ffff,
      };
      const frame = encodeSignedResult({ envelope: signResult(testIdentity(1).secretKey, r), result: r });
      expect(frame.length).toBeLessThanOrEqual(maxSignedResultBytes(spec));
      expect(maxSignedResultBytes(spec)).toBeLessThan(frame.length + 200);
    }
  });
});

describe('SparseLoCo verdicts', () => {
  it("take the update check's own threshold (bench/sparseloco-verify.ts measured honest results ≥ 0.6)", () => {
    const m = (updateAgreement: number, fingerprintAgreement = 1) => ({
      fingerprintAgreement,
      updateAgreement,
    });
    expect(verificationPasses(m(0.35), 'sparseloco')).toBe(true);
    expect(verificationPasses(m(0.35), 'distro')).toBe(false);
    expect(verificationPasses(m(0.25), 'sparseloco')).toBe(false);
    expect(verificationPasses(m(0.9, 0.9), 'sparseloco')).toBe(false);
  });
});
