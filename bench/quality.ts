// bench:quality — what model each method trains from the embedded default run, at equal tokens and equal
// data order: held-out loss (nats/byte on a fixed slice of the dataset's held-out split, the same for every
// method), its ratio to single-process AdamW, the bytes each peer sends per token it trains on and the ratio
// to fp32 data-parallel gradients, the loss curve, wall time and settings. Network methods run the real
// client, coordinator and optimizer code with N peers in this process (bench/lib/network-run.ts): `distro`
// the default run's DisTrO variant, `sparseloco` the default run itself. Steps are optimizer steps of one
// global batch (a SparseLoCo round is H of them), so every method trains the same tokens.
// Progress on stderr; prints one JSON object on stdout (`--json`: nothing else).
//
//   npm run -s bench:quality -- --json [--preset tiny] [--peers 4] [--steps 300] [--method adamw,distro,sparseloco]
import { cpus, loadavg } from 'node:os';
import { createRequire } from 'node:module';
import { modelConfigForRun, parameterCount } from '@meshtrain/model';
import { evalIndices } from '../apps/node-trainer/src/commands/baseline.ts';
import { ensureBrownDataset } from '../apps/node-trainer/src/dataset/brown.ts';
import { localDataSource } from '../apps/node-trainer/src/net/local-data.ts';
import { baseRunFor, parseQualityFlags, UsageError, USAGE } from './lib/quality-config.ts';
import { METHODS, type MethodContext, type MethodResult } from './lib/quality-methods.ts';
import { SharedOrt } from './lib/shared-ort.ts';
import { StepProgress } from './lib/step-progress.ts';

async function main(): Promise<number> {
  let flags;
  try {
    flags = parseQualityFlags(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError) && !(e instanceof TypeError)) throw e;
    if (e.message) console.error(e.message);
    console.error(USAGE);
    console.error(
      `\nmethods:\n${Object.entries(METHODS)
        .map(([n, m]) => `  ${n.padEnd(11)} ${m.summary}`)
        .join('\n')}`,
    );
    return e.message ? 2 : 0;
  }
  const unknown = flags.methods.filter((m) => !(m in METHODS));
  if (unknown.length > 0) {
    console.error(
      `--method: unknown ${unknown.join(', ')}; one or more of ${Object.keys(METHODS).join(', ')}`,
    );
    return 2;
  }
  const started = performance.now();
  const loadStart = loadavg();
  const log = (line: string) => console.error(line);

  const base = baseRunFor(flags);
  const model = modelConfigForRun(base);
  const dataDir = flags.data ?? (await ensureBrownDataset());
  // The peers' data in the run's sample order; AdamW reads its batches through the same order (data.order).
  const data = await localDataSource(dataDir, flags.seqLen, base.model.LLM.data_location);
  const heldOutRows = evalIndices(data.dataset.val, flags.evalBatches, flags.batchSize);
  if (heldOutRows.length === 0) throw new Error('the held-out split has fewer samples than one batch');
  const heldOut = heldOutRows.map((rows) => ({ tokens: data.dataset.val.batch(rows), rows: rows.length }));
  const heldOutTokens = heldOutRows.length * flags.batchSize * flags.seqLen;
  // node-trainer train's own evaluation: held-out samples 0..15, in its micro-batches.
  const micro = base.meshtrain.micro_batch_size;
  const first16 = Array.from({ length: Math.ceil(16 / micro) }, (_, b) =>
    Array.from({ length: Math.min(micro, 16 - b * micro) }, (_, i) => b * micro + i),
  ).map((rows) => ({ tokens: data.dataset.val.batch(rows), rows: rows.length }));
  const ort = new SharedOrt(model, flags.seqLen, base.meshtrain.micro_batch_size, {
    intraOpThreads: flags.threads,
    spinning: false,
  });
  const ctx: MethodContext = {
    flags,
    base,
    model,
    parameters: parameterCount(model),
    dataDir,
    data,
    trainSamples: data.dataset.train.index.sampleCount,
    sampleOrder: data.order,
    heldOut,
    first16,
    ort,
    recordedOrder: null,
    progress: (label, total) => new StepProgress(label, total, flags.progressEvery),
    log,
  };
  log(
    `bench:quality ${flags.preset} (${ctx.parameters.toLocaleString('en-US')} params), ${flags.steps} steps × ` +
      `${flags.batchSize}×${flags.seqLen} tokens (${data.order.kind} order), ${flags.peers} peers, held-out ${heldOutTokens.toLocaleString('en-US')} tokens; ` +
      `methods ${flags.methods.join(', ')}; load ${loadStart.map((x) => x.toFixed(2)).join(' ')}`,
  );

  // Network methods first: AdamW trains the order the first of them recorded.
  const order = [...flags.methods].sort((a, b) => rank(a) - rank(b));
  const results: MethodResult[] = [];
  try {
    for (const name of order) results.push(...(await (METHODS[name] as (typeof METHODS)[string]).run(ctx)));
  } finally {
    await ort.dispose();
  }
  const reference = results.find((r) => r.method === 'adamw');
  for (const r of results) r.ratio_to_adamw = reference ? r.held_out_loss / reference.held_out_loss : null;

  const report = {
    bench: 'quality',
    date: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      cpu_model: cpus()[0]?.model ?? 'unknown',
      load_average_start: loadStart,
      load_average_end: loadavg(),
      node: process.versions.node,
      onnxruntime_node: createRequire(import.meta.url)('onnxruntime-node/package.json').version as string,
    },
    run: {
      preset: flags.preset,
      parameters: ctx.parameters,
      peers: flags.peers,
      steps: flags.steps,
      global_batch: flags.batchSize,
      seq_len: flags.seqLen,
      tokens_per_step: flags.batchSize * flags.seqLen,
      dataset: data.dataset.manifest.source,
      data_order: data.order.kind,
      held_out: {
        split: 'val',
        samples: heldOutRows.length * flags.batchSize,
        tokens: heldOutTokens,
        unit: 'nats per token (per byte: the tokenizer is byte-level)',
      },
      eval_every: flags.evalEvery,
    },
    results,
    wall_seconds: (performance.now() - started) / 1000,
  };
  for (const r of results)
    log(
      `${r.method}${r.settings.topk === undefined ? '' : ` top-${r.settings.topk}`}: held-out ${r.held_out_loss.toFixed(4)}` +
        (r.ratio_to_adamw === null ? '' : ` (${((r.ratio_to_adamw - 1) * 100).toFixed(1)}% vs AdamW)`) +
        `, ${r.bytes_per_token_per_peer.toFixed(3)} B/token/peer, ${r.ratio_vs_fp32.toFixed(0)}× under fp32, ` +
        `${r.wall_seconds.toFixed(0)} s`,
    );
  console.log(JSON.stringify(report, null, flags.json ? undefined : 2));
  return 0;
}

function rank(method: string): number {
  return (METHODS[method] as (typeof METHODS)[string]).kind === 'network' ? 0 : 1;
}

process.exitCode = await main();
