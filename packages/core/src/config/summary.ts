import { runLrSchedule } from './run-config.ts';
import type { Optimizer, RunConfig } from './types.ts';

/** Compact rates for one line: 0.001 → "1e-3", 0.00015 → "1.5e-4". */
export function formatRate(x: number): string {
  if (x === 0) return '0';
  return x.toExponential().replace('e+', 'e');
}

/** The optimizer in a few words, e.g. `SparseLoCo H=10 chunk 64 top-64 2-bit raw`. */
export function optimizerSummary(o: Optimizer): string {
  if ('AdamW' in o) return `AdamW betas ${o.AdamW.betas.join('/')}`;
  if ('SparseLoCo' in o) {
    const s = o.SparseLoCo;
    return `SparseLoCo H=${s.inner_steps} chunk ${s.compression_chunk} top-${s.compression_topk} ${s.quantization_bits}-bit ${s.domain}`;
  }
  const d = o.Distro;
  return `DisTrO chunk ${d.compression_chunk} top-${d.compression_topk} ${d.quantize_1bit ? '1-bit' : 'full values'}`;
}

/** e.g. `run demo preset tiny, 300 steps, gbs 8→8, DisTrO chunk 64 top-8 1-bit, Cosine lr 1e-3`. */
export function summarizeRunConfig(run: RunConfig): string {
  const id = run.run_id ?? '(unnamed)';
  const overrides = Object.keys(run.meshtrain.model ?? {}).length;
  const model =
    (run.meshtrain.preset === undefined ? 'no preset' : `preset ${run.meshtrain.preset}`) +
    (overrides > 0 ? ` (+${overrides} overrides)` : '');
  const c = run.config;
  const lr = runLrSchedule(run);
  return [
    `run ${id} ${model}`,
    // A SparseLoCo round is H optimizer steps: say both, so nobody reads 60 rounds as 60 steps.
    'SparseLoCo' in run.model.LLM.optimizer
      ? `${c.total_steps} rounds × ${run.model.LLM.optimizer.SparseLoCo.inner_steps} steps`
      : `${c.total_steps} steps`,
    `gbs ${c.global_batch_size_start}→${c.global_batch_size_end}`,
    optimizerSummary(run.model.LLM.optimizer),
    `${lr.kind} lr ${formatRate(lr.base_lr)}`,
  ].join(', ');
}
