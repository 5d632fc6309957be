// The methods bench:quality compares, one table entry each. A network method is a way to turn the default
// run into run configs (one per setting the flags ask for); the in-process network (network-run.ts) trains
// each exactly as peers on a relay would. AdamW is the single-process reference at equal tokens and order:
// one AdamW step per optimizer step of the network run (a SparseLoCo round is H of them).
import { innerStepsOf, type RunConfig } from '@meshtrain/core';
import type { Progress } from '../../apps/node-trainer/src/progress/index.ts';
import { adamwSettings, runAdamW, type AdamWOrder } from './adamw-run.ts';
import {
  FP32_BYTES,
  equalBatches,
  globalBatches,
  innerStepBatches,
  plannedBatches,
  sameBatches,
  type PeerTraffic,
} from './quality-accounting.ts';
import {
  describeSchedule,
  sparseLoCoRunFor,
  UsageError,
  validated,
  withPeakLr,
  type QualityFlags,
} from './quality-config.ts';
import { runNetwork, type CurvePoint, type HeldOutBatch, type NetworkRunResult } from './network-run.ts';
import type { DataSource } from '@meshtrain/client';
import type { SharedOrt } from './shared-ort.ts';
import { shuffleSeedOf, type LlamaConfig, type SampleOrder } from '@meshtrain/model';

export interface MethodContext {
  flags: QualityFlags;
  /**
   * The default run's DisTrO variant at the flags' shape (preset, steps, batch, sequence length): what every
   * method shares (model, data, AdamW's warmup); each network method derives its runs from its own template.
   */
  base: RunConfig;
  model: LlamaConfig;
  parameters: number;
  dataDir: string;
  data: DataSource;
  trainSamples: number;
  /** The run's sample order, as the peers' data source applies it (AdamW reads its batches through it). */
  sampleOrder: SampleOrder;
  heldOut: readonly HeldOutBatch[];
  /** Held-out samples 0..15 in micro-batches, as \`node-trainer train\` evaluates by default. */
  first16: readonly HeldOutBatch[];
  ort: SharedOrt;
  /**
   * The global batch of every optimizer step the first network run trained, once one ran (AdamW trains
   * exactly these), with the method that trained them and whether its rounds were the planned ones.
   */
  recordedOrder: RecordedOrder | null;
  progress(label: string, total: number): Progress;
  log(line: string): void;
}

export interface RecordedOrder {
  method: string;
  batches: number[][];
  matchesPlan: boolean;
}

export interface MethodResult {
  method: string;
  settings: Record<string, unknown>;
  held_out_loss: number;
  /** Loss on held-out samples 0..15 only: what \`node-trainer train\` logs at each epoch end. */
  first16_held_out_loss: number;
  /** held_out_loss / AdamW's (filled in once every method ran; null without an adamw run). */
  ratio_to_adamw: number | null;
  trained_steps: number;
  tokens_trained: number;
  /** Mean over peers of the bytes a peer sent per token it trained on (AdamW: fp32 data parallel's). */
  bytes_per_token_per_peer: number;
  /** fp32 data-parallel gradients' bytes over the bytes actually sent, mean over peers (AdamW: 1). */
  ratio_vs_fp32: number;
  peers: PeerTraffic[] | null;
  curve: CurvePoint[];
  data_order: {
    source: 'network run' | 'planned' | 'shuffled';
    /**
     * Network methods: every round trained the planned consecutive samples (H × the batch for SparseLoCo),
     * one step per inner batch. AdamW: that, and it trains exactly those steps.
     */
    matches_plan: boolean;
    steps: number;
    /** AdamW only: the recorded steps were not all one batch size and were re-cut (equalBatches). */
    recut?: boolean;
  };
  protocol: NetworkRunResult['protocol'] | null;
  wall_seconds: number;
  /** Network methods: seconds inside ONNX Runtime (train steps and evaluations; the rest is DisTrO, protocol
   * and data). AdamW: runBaseline's total seconds. */
  ort_seconds: number | null;
}

export interface QualityMethod {
  summary: string;
  /** Network methods run first: AdamW trains the data order they recorded. */
  kind: 'network' | 'single-process';
  run(ctx: MethodContext): Promise<MethodResult[]>;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** A method whose run configs N in-process peers train; `variants` gives one config per setting. */
function networkMethod(
  name: string,
  summary: string,
  variants: (ctx: MethodContext) => { run: RunConfig; settings: Record<string, unknown> }[],
): QualityMethod {
  return {
    summary,
    kind: 'network',
    async run(ctx) {
      const out: MethodResult[] = [];
      for (const v of variants(ctx)) {
        const { flags } = ctx;
        const rounds = v.run.config.total_steps;
        // Evaluation points and the curve count optimizer steps (SparseLoCo: H inner steps per round).
        const h = innerStepsOf(v.run.model.LLM.optimizer);
        const steps = rounds * h;
        ctx.log(`${name}: ${JSON.stringify(v.settings)}`);
        const progress = ctx.progress(name, rounds);
        const r = await runNetwork({
          run: v.run,
          peers: flags.peers,
          data: ctx.data,
          ort: ctx.ort,
          heldOut: ctx.heldOut,
          evalSteps: Array.from(
            { length: Math.floor(steps / flags.evalEvery) },
            (_, i) => (i + 1) * flags.evalEvery,
          ),
          onStep: (step, detail) => progress.update(step, detail),
        });
        progress.finish(`held-out ${r.final_held_out_loss.toFixed(4)}`);
        // One global batch per optimizer step: a SparseLoCo round's inner step h is the union of its trainers'
        // h-th inner batches. The plan is checked per round (H × the batch, consecutive from sample 0).
        const order = innerStepBatches(r.trained, h);
        const ramp = { ...v.run.config, max_seq_len: v.run.model.LLM.max_seq_len, inner_steps: h };
        const roundBatches = globalBatches(r.trained);
        const matchesPlan =
          sameBatches(roundBatches, plannedBatches(ramp, roundBatches.length)) &&
          order.length === roundBatches.length * h;
        ctx.recordedOrder ??= { method: name, batches: order, matchesPlan };
        out.push({
          method: name,
          settings: v.settings,
          held_out_loss: r.final_held_out_loss,
          first16_held_out_loss: await ctx.ort.heldOutLoss(r.final_params, ctx.first16),
          ratio_to_adamw: null,
          trained_steps: r.trained_steps,
          tokens_trained: r.peers.reduce((n, p) => n + p.tokens, 0),
          bytes_per_token_per_peer: mean(r.peers.map((p) => p.bytes_per_token)),
          ratio_vs_fp32: mean(r.peers.map((p) => p.ratio_vs_fp32)),
          peers: r.peers,
          curve: r.curve,
          data_order: { source: 'network run', matches_plan: matchesPlan, steps: order.length },
          protocol: r.protocol,
          wall_seconds: r.wall_seconds,
          ort_seconds: r.ort_seconds,
        });
      }
      return out;
    },
  };
}

/** The run's settings a network method changes or depends on, for the JSON. */
function runSettings(run: RunConfig, peers: number): Record<string, unknown> {
  return {
    preset: run.meshtrain.preset,
    peers,
    steps: run.config.total_steps,
    global_batch: run.config.global_batch_size_end,
    seq_len: run.model.LLM.max_seq_len,
    micro_batch: run.meshtrain.micro_batch_size,
    // A verified run (> 0) trains at the shared parameters, without DisTrO's lookahead.
    verification_percent: run.config.verification_percent,
    data_order: shuffleSeedOf(run.model.LLM.data_location) === null ? 'corpus' : 'seeded',
    lr_schedule: describeSchedule(run),
  };
}

function distroVariants(ctx: MethodContext): { run: RunConfig; settings: Record<string, unknown> }[] {
  const { flags, base } = ctx;
  const opt = base.model.LLM.optimizer;
  if (!('Distro' in opt)) throw new Error('the default run is not a DisTrO run');
  const out = [];
  for (const topk of flags.topk.length ? flags.topk : [opt.Distro.compression_topk])
    for (const lr of flags.lr.length ? flags.lr : [null]) {
      let run = structuredClone(base);
      const d = (run.model.LLM.optimizer as typeof opt).Distro;
      d.compression_topk = topk;
      if (flags.chunk !== null) d.compression_chunk = flags.chunk;
      if (flags.bits !== null) {
        if (flags.bits !== 1 && flags.bits !== 32) throw new UsageError('--bits: 1 or 32 for distro');
        d.quantize_1bit = flags.bits === 1;
      }
      run = lr === null ? validated(run) : withPeakLr(run, lr);
      out.push({
        run,
        settings: {
          ...runSettings(run, flags.peers),
          chunk: d.compression_chunk,
          topk: d.compression_topk,
          bits: d.quantize_1bit ? 1 : 32,
          compression_decay: d.compression_decay,
          clip_grad_norm: d.clip_grad_norm ?? null,
          weight_decay: d.weight_decay ?? 0,
        },
      });
    }
  return out;
}

/**
 * The embedded default run (SparseLoCo) at the flags' shape, one config per --topk × --lr: --lr is the inner
 * AdamW's peak (the schedule's shape kept), --chunk, --bits and --inner-steps set the optimizer's table.
 */
export function sparseLoCoVariants(
  ctx: Pick<MethodContext, 'flags'>,
): { run: RunConfig; settings: Record<string, unknown> }[] {
  const { flags } = ctx;
  const base = sparseLoCoRunFor(flags);
  const opt = base.model.LLM.optimizer;
  if (!('SparseLoCo' in opt)) throw new Error('the embedded default run is not a SparseLoCo run');
  const out = [];
  for (const topk of flags.topk.length ? flags.topk : [opt.SparseLoCo.compression_topk])
    for (const lr of flags.lr.length ? flags.lr : [null]) {
      let run = structuredClone(base);
      const d = (run.model.LLM.optimizer as typeof opt).SparseLoCo;
      d.compression_topk = topk;
      if (flags.chunk !== null) d.compression_chunk = flags.chunk;
      if (flags.bits !== null) {
        if (flags.bits > 8) throw new UsageError('--bits: 1..8 for sparseloco');
        d.quantization_bits = flags.bits;
      }
      run = lr === null ? validated(run) : withPeakLr(run, lr);
      const o = (run.model.LLM.optimizer as typeof opt).SparseLoCo;
      out.push({
        run,
        settings: {
          ...runSettings(run, flags.peers),
          // runSettings' steps are rounds here; these are the optimizer steps AdamW compares with.
          rounds: run.config.total_steps,
          steps: run.config.total_steps * o.inner_steps,
          inner_steps: o.inner_steps,
          chunk: o.compression_chunk,
          topk: o.compression_topk,
          bits: o.quantization_bits,
          domain: o.domain,
          error_decay: o.error_decay,
          outer_lr: o.outer_lr,
          betas: o.betas,
          weight_decay: o.weight_decay,
          clip_grad_norm: o.clip_grad_norm,
        },
      });
    }
  return out;
}

/** AdamW's variants: the network run's order (the fair comparison) and/or node-trainer baseline's own. */
const adamw: QualityMethod = {
  summary: "node-trainer baseline's AdamW in one process, on the network run's global batches",
  kind: 'single-process',
  async run(ctx) {
    const { flags, base } = ctx;
    const ramp = { ...base.config, max_seq_len: base.model.LLM.max_seq_len };
    const schedule = Object.values(base.model.LLM.lr_schedule)[0] as { warmup_steps: number };
    const out: MethodResult[] = [];
    for (const kind of flags.adamwOrders) {
      // Without a network run, the order a clean single-epoch run trains: every step but the last (the last
      // step is a drain round that applies the final results).
      // AdamW's train step takes one batch size; a recorded order with steps of other sizes is re-cut.
      const recorded = ctx.recordedOrder ? equalBatches(ctx.recordedOrder.batches, flags.batchSize) : null;
      if (kind === 'run' && recorded?.recut)
        ctx.log(
          `adamw: the ${ctx.recordedOrder?.method} run's steps are not all ${flags.batchSize} samples; its samples re-cut into equal steps in the same sequence (${recorded.dropped} left over)`,
        );
      const batches = recorded?.batches ?? plannedBatches(ramp, base.config.total_steps - 1);
      const order: AdamWOrder =
        kind === 'run'
          ? { kind: 'batches', batches, order: ctx.sampleOrder }
          : { kind: 'shuffled', steps: flags.steps, batchSize: flags.batchSize };
      // node-trainer baseline's defaults as they are: seed 0 for the init and the shuffle.
      const seed = kind === 'run' ? base.meshtrain.seed : 0;
      const steps = order.kind === 'batches' ? order.batches.length : order.steps;
      ctx.log(`adamw (${kind} order): ${steps} steps × ${flags.batchSize} sequences, init seed ${seed}`);
      const started = performance.now();
      const { result: r, params } = await runAdamW({
        preset: flags.preset,
        config: ctx.model,
        dataDir: ctx.dataDir,
        order,
        seqLen: flags.seqLen,
        lr: flags.adamwLr,
        warmupSteps: schedule.warmup_steps,
        seed,
        evalEvery: flags.evalEvery,
        evalBatches: flags.evalBatches,
        cpu: { intraOpThreads: flags.threads, spinning: false },
        progress: ctx.progress(`adamw-${kind}`, steps),
      });
      const tokensPerPeerStep = (r.batch_size * r.seq_len) / flags.peers;
      out.push({
        method: 'adamw',
        settings: {
          ...adamwSettings(flags.adamwLr, schedule.warmup_steps, r.steps),
          preset: flags.preset,
          steps: r.steps,
          global_batch: r.batch_size,
          seq_len: r.seq_len,
          init_seed: seed,
          data_order:
            kind === 'run'
              ? `${ctx.recordedOrder ? `the ${ctx.recordedOrder.method} run's` : 'the planned'} global batches (${ctx.sampleOrder.kind} order)`
              : "node-trainer baseline's shuffle (seed 0)",
        },
        // Through the same evaluation as the network methods (runBaseline's own final eval reads the same set).
        held_out_loss: await ctx.ort.heldOutLoss(params, ctx.heldOut),
        first16_held_out_loss: await ctx.ort.heldOutLoss(params, ctx.first16),
        ratio_to_adamw: null,
        trained_steps: r.steps,
        tokens_trained: r.steps * r.tokens_per_step,
        // What each of `peers` data-parallel workers would send: every step's fp32 gradient.
        bytes_per_token_per_peer: (FP32_BYTES * ctx.parameters) / tokensPerPeerStep,
        ratio_vs_fp32: 1,
        peers: null,
        curve: r.evals.map((e) => ({ step: e.step, held_out_loss: e.val_loss, train_loss: e.train_loss })),
        data_order: {
          source: kind === 'shuffled' ? 'shuffled' : ctx.recordedOrder ? 'network run' : 'planned',
          // The network run's rounds were the planned ones and AdamW trains its steps as they were.
          matches_plan:
            kind === 'run' &&
            !recorded?.recut &&
            (ctx.recordedOrder?.matchesPlan ?? sameBatches(batches, plannedBatches(ramp, batches.length))),
          recut: kind === 'run' && Boolean(recorded?.recut),
          steps: r.steps,
        },
        protocol: null,
        wall_seconds: (performance.now() - started) / 1000,
        ort_seconds: r.total_seconds,
      });
    }
    return out;
  },
};

/**
 * Every method by its --method name. A new network method is one more networkMethod entry: a summary and a
 * function from the flags to run configs (the in-process network trains any DisTrO or SparseLoCo run).
 */
export const METHODS: Record<string, QualityMethod> = {
  adamw,
  distro: networkMethod(
    'distro',
    "the run's DisTrO (chunk, top-k, bits, decay from the run; --topk, --lr, --chunk, --bits override)",
    distroVariants,
  ),
  sparseloco: networkMethod(
    'sparseloco',
    "the embedded default run's SparseLoCo (H inner AdamW steps per round; --lr: inner peak, --inner-steps, --topk, --chunk, --bits 1..8 override)",
    sparseLoCoVariants,
  ),
};
