// Kernel runs of one train step on an onnxruntime-node EP, counted from ORT's own profiler: each kernel ORT's
// executor runs leaves one `<node>_kernel_time` event (cat "Node") inside that run's `model_run` span, with its
// op type in `args.op_name`. The session is created with the EP options createSession (session.ts) uses for
// float32 graphs, so the counted graph is the one training runs after ORT's optimisations.
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { configureWebgpu } from './session.ts';

interface ProfileEvent {
  cat: string;
  name: string;
  ts: number;
  dur: number;
  args?: { op_name?: string };
}

function profiledSessionOptions(
  device: 'webgpu' | 'cpu',
  prefix: string,
): ort.InferenceSession.SessionOptions {
  const profiling = { enableProfiling: true, profileFilePrefix: prefix };
  if (device === 'webgpu')
    return {
      ...profiling,
      executionProviders: ['webgpu'],
      extra: { session: { disable_cpu_ep_fallback: '1' } },
    };
  return { ...profiling, executionProviders: ['cpu'], graphOptimizationLevel: 'all' };
}

/** Kernel runs inside the last `model_run` of an ORT profile: `byOp` by ONNX op type, summing to `total`. */
export function countKernelRuns(events: ProfileEvent[]): { total: number; byOp: Record<string, number> } {
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
  const last = runs.reduce<ProfileEvent | undefined>((a, e) => (!a || e.ts > a.ts ? e : a), undefined);
  if (!last) throw new Error('ORT profile has no model_run event');
  const byOp: Record<string, number> = {};
  let total = 0;
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    if (e.ts < last.ts || e.ts > last.ts + last.dur) continue;
    const op = e.args?.op_name ?? 'unknown';
    byOp[op] = (byOp[op] ?? 0) + 1;
    total++;
  }
  return { total, byOp };
}

/**
 * Kernel runs per train step of `onnx` fed `feeds` on `device`. Runs the step twice in a profiled session of
 * its own and counts the second run (the first also compiles WebGPU pipelines; both run the same kernels).
 */
export async function kernelRunsPerStep(
  onnx: Uint8Array,
  feeds: Record<string, ort.Tensor>,
  o: { device: 'webgpu' | 'cpu' },
): Promise<{ total: number; byOp: Record<string, number> }> {
  if (o.device === 'webgpu') configureWebgpu();
  const dir = await mkdtemp(join(tmpdir(), 'meshtrain-ort-profile-'));
  try {
    const session = await ort.InferenceSession.create(
      onnx,
      profiledSessionOptions(o.device, join(dir, 'step')),
    );
    try {
      await session.run(feeds);
      await session.run(feeds);
      session.endProfiling();
    } finally {
      await session.release();
    }
    const files = (await readdir(dir)).filter((f) => f.endsWith('.json'));
    if (files.length !== 1) throw new Error(`expected one ORT profile in ${dir}, found ${files.length}`);
    return countKernelRuns(
      JSON.parse(await readFile(join(dir, files[0] as string), 'utf8')) as ProfileEvent[],
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
