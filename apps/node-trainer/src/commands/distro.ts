// node-trainer distro: DisTrO compression and apply on files, to check our implementation against others
// (or CPU against WebGPU). `compress` turns a momentum/delta checkpoint into a result JSON; `apply` applies
// several peers' result files to parameters as one round: p ← p·(1 − lr·wd) − lr·sign(IDCT(mean)).
import { readFile } from 'node:fs/promises';
import { encodeSafetensors, type TensorToEncode } from '@meshtrain/model';
import { applyResults, quantize1bit, type TensorResult } from '@meshtrain/distro';
import { CliError, type Command } from '../command.ts';
import { openBackend } from '../distro/backend.ts';
import { parseResultFile, readTensors, resultToJson, type ResultFileJson } from '../distro/io.ts';
import { writeFileAtomic } from '@meshtrain/model/node';
import { floatFlag, intFlag, parseFlags } from '../options/index.ts';

function required(name: string, v: string | undefined): string {
  if (v === undefined) throw new CliError(`--${name} is required`);
  return v;
}

async function compress(argv: string[]): Promise<number> {
  const { values } = parseFlags(argv, {
    in: { type: 'string' },
    chunk: { type: 'string' },
    topk: { type: 'string' },
    backend: { type: 'string' },
    'quantize-1bit': { type: 'boolean' },
    out: { type: 'string' },
  });
  const chunk = intFlag('chunk', required('chunk', values.chunk), 64, 1);
  const topk = intFlag('topk', required('topk', values.topk), 8, 1);
  const out = required('out', values.out);
  const { tensors } = await readTensors(required('in', values.in), '--in');
  const quantized = values['quantize-1bit'] === true;
  const { backend, close } = await openBackend(values.backend, chunk);
  try {
    const file: ResultFileJson = { chunk, topk, quantize_1bit: quantized, tensors: [] };
    for (const t of tensors) {
      const handle = backend.tensor(t.shape, t.data);
      let r = await backend.compress(handle, topk);
      backend.release(handle);
      if (quantized) r = quantize1bit(r);
      file.tensors.push(resultToJson(t.name, t.shape, r));
    }
    await writeFileAtomic(out, JSON.stringify(file));
    console.log(`distro compress: ${tensors.length} tensors on ${backend.description} → ${out}`);
  } finally {
    close();
  }
  return 0;
}

async function apply(argv: string[]): Promise<number> {
  const { values } = parseFlags(argv, {
    params: { type: 'string' },
    results: { type: 'string' },
    lr: { type: 'string' },
    'weight-decay': { type: 'string' },
    backend: { type: 'string' },
    out: { type: 'string' },
  });
  const lr = floatFlag('lr', required('lr', values.lr), 0, (n) => n >= 0);
  const weightDecay = floatFlag('weight-decay', values['weight-decay'], 0, (n) => n >= 0);
  const out = required('out', values.out);
  const { tensors, metadata } = await readTensors(required('params', values.params), '--params');
  const paths = required('results', values.results).split(',').filter(Boolean);
  if (paths.length === 0) throw new CliError('--results: name at least one result file');
  const files = [];
  for (const path of paths) {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      throw new CliError(`--results: cannot read ${path} (${(err as Error).message})`);
    }
    files.push(parseResultFile(text, path));
  }
  const chunk = files[0]!.chunk;
  if (files.some((f) => f.chunk !== chunk)) throw new CliError('--results: files use different chunk sizes');
  const names = new Set(tensors.map((t) => t.name));
  for (const [i, f] of files.entries())
    for (const name of f.tensors.keys())
      if (!names.has(name)) throw new CliError(`--results: ${paths[i]}: tensor ${name} is not in --params`);
  const { backend, close } = await openBackend(values.backend, chunk);
  try {
    const written = new Map<string, TensorToEncode>();
    for (const t of tensors) {
      const peers: TensorResult[][] = [];
      for (const f of files) {
        const entry = f.tensors.get(t.name);
        if (!entry) continue;
        if (entry.shape.join() !== t.shape.join())
          throw new CliError(
            `--results: ${t.name} has shape [${entry.shape}] in a result, [${t.shape}] in --params`,
          );
        peers.push([entry.result]);
      }
      const handle = backend.tensor(t.shape, t.data);
      try {
        applyResults(backend, [handle], peers, { lr, weightDecay });
      } catch (err) {
        throw new CliError(`--results: ${t.name}: ${(err as Error).message}`);
      }
      written.set(t.name, { shape: t.shape, data: await backend.read(handle) });
      backend.release(handle);
      await backend.finish();
    }
    await writeFileAtomic(out, encodeSafetensors(written, metadata));
    console.log(
      `distro apply: ${files.length} result files, ${tensors.length} tensors on ${backend.description} → ${out}`,
    );
  } finally {
    close();
  }
  return 0;
}

const command: Command = {
  summary: 'DisTrO on files: compress a delta to a result JSON, or apply result JSONs to parameters',
  usage:
    'compress --in DELTA.safetensors --chunk C --topk K [--backend cpu|webgpu] [--quantize-1bit] --out RESULT.json\n' +
    '       node-trainer distro apply --params P.safetensors --results R1.json,R2.json,… --lr LR [--weight-decay WD] [--backend cpu|webgpu] --out P2.safetensors',
  async run(argv) {
    const [sub, ...rest] = argv;
    if (sub === 'compress') return compress(rest);
    if (sub === 'apply') return apply(rest);
    throw new CliError(`distro: expected 'compress' or 'apply', got '${sub ?? ''}'`);
  },
};

export default command;
