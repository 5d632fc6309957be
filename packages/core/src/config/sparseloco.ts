// `[model.LLM.optimizer.SparseLoCo]`: its bounds, and the values of keys a run leaves out — in one place, so
// tuning them (issue: measured defaults) is a change here and nowhere else. docs/protocol.md "SparseLoCo
// rounds" says what each key does; packages/distro/README.md "SparseLoCo" how.
import type { Optimizer, SparseLoCoOptimizer } from './types.ts';

/** Where top-k selects: the chunk's entries themselves, or its DCT-II coefficients. */
export const SPARSE_DOMAINS = ['raw', 'dct'] as const;

export { MAX_INNER_STEPS } from '../state/coordinator-config.ts';
/** The backends' largest chunk side (it keeps the exact decode's integer bounds provable). */
export const MAX_COMPRESSION_CHUNK = 256;
/** A code is 1 sign bit and up to 7 level bits (core's wire, valueKind 2). */
export const MAX_QUANTIZATION_BITS = 8;

/**
 * What an omitted key means: the starting values after SparseLoCo (Sarfi et al. 2025) at chunk 64: H = 10
 * inner AdamW steps (β = 0.9/0.95, weight decay 0.1, clip 1), error feedback decaying by 0.95, the top 64
 * of each 64 × 64 chunk (1.6 %) at 2 bits, raw entries, outer lr 1. The embedded default run names every key
 * with the setting measured best on the tiny model (H = 5, top-32, 1 bit: packages/distro/README.md
 * "Tuning"); these stay as they are so that existing run files keep their meaning.
 */
export const SPARSELOCO_DEFAULTS: Readonly<SparseLoCoOptimizer> = Object.freeze({
  inner_steps: 10,
  betas: [0.9, 0.95] as [number, number],
  eps: 1e-8,
  weight_decay: 0.1,
  clip_grad_norm: 1,
  error_decay: 0.95,
  compression_topk: 64,
  compression_chunk: 64,
  quantization_bits: 2,
  domain: 'raw',
  outer_lr: 1,
});

/** The table with every omitted key at its default, and the names of the keys that were defaulted. */
export function withSparseLoCoDefaults(table: Partial<SparseLoCoOptimizer>): {
  optimizer: SparseLoCoOptimizer;
  defaulted: (keyof SparseLoCoOptimizer)[];
} {
  const defaulted: (keyof SparseLoCoOptimizer)[] = [];
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(SPARSELOCO_DEFAULTS) as (keyof SparseLoCoOptimizer)[]) {
    const given = table[key];
    if (given === undefined) defaulted.push(key);
    const v = given ?? SPARSELOCO_DEFAULTS[key];
    out[key] = Array.isArray(v) ? [...(v as number[])] : v;
  }
  return { optimizer: out as unknown as SparseLoCoOptimizer, defaulted };
}

/** Inner steps per round of a run's optimizer: H for SparseLoCo, 1 for DisTrO (one gradient step per round). */
export function innerStepsOf(optimizer: Optimizer): number {
  return 'SparseLoCo' in optimizer ? optimizer.SparseLoCo.inner_steps : 1;
}

/** The chunk side both optimizers cut tensors by (the DisTrO backend's chunk); null for AdamW (no results). */
export function compressionChunkOf(optimizer: Optimizer): number | null {
  if ('Distro' in optimizer) return optimizer.Distro.compression_chunk;
  if ('SparseLoCo' in optimizer) return optimizer.SparseLoCo.compression_chunk;
  return null;
}
