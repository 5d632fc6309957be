// node-trainer eval: the held-out loss of a checkpoint on exactly the batches `node-trainer baseline` evaluates,
// so a run's final model and the baseline's are compared on the same text with the same graph. The checkpoint
// is a directory (config.json + model.safetensors, as `baseline --out` writes) or a run's newest checkpoint on
// a relay.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fetchCheckpointSummary } from '@meshtrain/client/relay-api';
import { CliError, type Command } from '../command.ts';
import { readCheckpoint } from '../fsio/checkpoint.ts';
import { dataFlag, intFlag, parseFlags } from '../options/index.ts';
import { heldOutLossOf } from './baseline.ts';

/** Downloads the run's newest checkpoint into a temporary directory; returns it and its step. */
async function fromRelay(relay: string, runId: string): Promise<{ dir: string; step: number }> {
  const summary = await fetchCheckpointSummary(relay, runId);
  if (!summary) throw new CliError(`run '${runId}' on ${relay} has no checkpoint yet`);
  const dir = await mkdtemp(join(tmpdir(), 'meshtrain-eval-'));
  for (const name of ['config.json', 'model.safetensors']) {
    const path = summary.files[name];
    if (!path) throw new CliError(`the relay's checkpoint of step ${summary.step} lists no ${name}`);
    const res = await fetch(new URL(path, relay));
    if (!res.ok) throw new CliError(`GET ${path}: HTTP ${res.status}`);
    await writeFile(join(dir, name), new Uint8Array(await res.arrayBuffer()));
  }
  return { dir, step: summary.step };
}

const command: Command = {
  summary: "held-out loss of a checkpoint on node-trainer baseline's evaluation batches",
  usage:
    '(--checkpoint DIR | --relay URL --run-id ID) [--batch-size B] [--seq-len T] [--eval-batches N] [--json]\n\n' +
    '  --checkpoint DIR  a checkpoint directory (config.json + model.safetensors, e.g. from baseline --out)\n' +
    "  --relay URL       instead: the newest checkpoint of --run-id on this relay (an epoch end's agreed parameters)\n" +
    '  --run-id ID       the run whose checkpoint to fetch (with --relay)\n' +
    '  --batch-size B    sequences per evaluation batch (default 64, as baseline)\n' +
    '  --seq-len T       tokens per sequence (default 128, as baseline)\n' +
    '  --eval-batches N  fixed validation batches (default 8, as baseline: 512 evenly spaced held-out samples)\n' +
    '  --data DIR        a prepare-data directory instead of the cached Brown corpus\n' +
    '  --json            print one JSON object',
  async run(argv) {
    const { values } = parseFlags(argv, {
      checkpoint: { type: 'string' },
      relay: { type: 'string' },
      'run-id': { type: 'string' },
      'batch-size': { type: 'string' },
      'seq-len': { type: 'string' },
      'eval-batches': { type: 'string' },
      data: { type: 'string' },
      json: { type: 'boolean' },
    });
    if (Boolean(values.checkpoint) === Boolean(values.relay))
      throw new CliError('give either --checkpoint DIR or --relay URL --run-id ID');
    if (values.relay && !values['run-id']) throw new CliError('--relay needs --run-id');
    const fetched = values.relay ? await fromRelay(values.relay, values['run-id'] as string) : null;
    try {
      const checkpoint = await readCheckpoint(fetched?.dir ?? (values.checkpoint as string));
      const config = checkpoint.config;
      const seqLen = intFlag('seq-len', values['seq-len'], Math.min(128, config.max_position_embeddings), 1);
      if (seqLen > config.max_position_embeddings)
        throw new CliError(
          `--seq-len ${seqLen} exceeds the model's ${config.max_position_embeddings} positions`,
        );
      const dataDir = await dataFlag(values.data);
      const r = await heldOutLossOf(
        {
          preset: 'checkpoint',
          config,
          device: 'cpu',
          batchSize: intFlag('batch-size', values['batch-size'], 64, 1),
          seqLen,
          evalBatches: intFlag('eval-batches', values['eval-batches'], 8, 1),
        },
        dataDir,
        checkpoint.params,
      );
      const out = {
        source: fetched ? `${values.relay} run ${values['run-id']} step ${fetched.step}` : values.checkpoint,
        held_out_loss: r.loss,
        batches: r.batches,
        tokens: r.tokens,
      };
      console.log(
        values.json
          ? JSON.stringify(out)
          : `held-out loss ${r.loss.toFixed(4)} over ${r.tokens.toLocaleString('en-US')} tokens (${out.source})`,
      );
      return 0;
    } finally {
      if (fetched) await rm(fetched.dir, { recursive: true, force: true });
    }
  },
};

export default command;
