// Kernel runs per step, counted from ONNX Runtime's own profiler: one session with `enableProfiling`, one warm-up
// run (first-run allocations and shader compiles), one counted run, then the JSON profile is parsed.
//
// Two kinds of events describe the counted run (the one inside the last `model_run` span). ORT's executor writes
// a `Node` event `<node>_kernel_time` per kernel it runs, on every EP. The WebGPU EP additionally writes an `Api`
// event `<node>&<op>&<program>` per compute program it dispatches, and the two differ: a Reshape kernel aliases
// its input and dispatches nothing, while a ReduceSum over leading axes dispatches a Transpose program and a
// reduction (measured on SwiftShader, ORT 1.30: a 1-layer micro train step ran 223 kernels, 207 dispatches).
// On WebGPU the dispatches are what a step pays per kernel launch, so they are what is counted there.
//
// The EP times each dispatch with GPU timestamp queries (it writes no `Api` events on a device without them), so
// the `Api` events' durations are GPU time per program: summed per op, they say where a step's GPU time goes.
// Their start times are GPU timestamps; on SwiftShader they fall inside the host's run spans, and should a
// driver's clock not line up so, the run's dispatches are told apart by their order instead (lastRunByOrder).
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { configureWebgpu } from './session.ts';

export interface KernelRuns {
  total: number;
  /** Kernel runs per ONNX op type. */
  byOp: Record<string, number>;
}

/** One event of ORT's Chrome-trace profile (only the fields read here). */
export interface ProfileEvent {
  cat?: string;
  name?: string;
  ts?: number;
  dur?: number;
  args?: { op_name?: string };
}

/** GPU time of one run's dispatches, from their timestamp queries: microseconds, in all and per op type. */
export interface GpuTime {
  totalUs: number;
  byOpUs: Record<string, number>;
}

export interface RunCounts {
  /** `Node` kernel-run events, per op type. */
  kernels: KernelRuns;
  /** WebGPU `Api` program-dispatch events, per op type of the node that dispatched them (empty on other EPs). */
  dispatches: KernelRuns;
  /** The summed durations of those dispatch events (zero on other EPs). */
  gpu: GpuTime;
}

function tally(into: KernelRuns, op: string): void {
  into.byOp[op] = (into.byOp[op] ?? 0) + 1;
  into.total++;
}

const apiOp = (e: ProfileEvent) => e.name?.split('&')[1] ?? 'unknown';

/**
 * The last of `runs` runs' dispatch events when their timestamps fall outside every host span: in GPU order,
 * the runs of one graph on the same inputs dispatch the same programs, so the events split into `runs` equal
 * sequences (checked) and the last one is the counted run.
 */
export function lastRunByOrder(api: readonly ProfileEvent[], runs: number): ProfileEvent[] {
  const sorted = [...api].sort((a, b) => (a.ts ?? 0) - (b.ts ?? 0));
  const n = sorted.length / runs;
  const names = (i: number) => sorted.slice(i * n, (i + 1) * n).map((e) => e.name);
  const last = names(runs - 1);
  if (
    !Number.isInteger(n) ||
    [...Array(runs - 1).keys()].some((i) => names(i).join('\n') !== last.join('\n'))
  )
    throw new Error(
      `the WebGPU EP's ${sorted.length} dispatch events lie outside the host's ${runs} runs and do not split into ${runs} equal runs`,
    );
  return sorted.slice((runs - 1) * n);
}

/** Counts the kernel runs and GPU dispatches that started inside the last `model_run` span of `events`. */
export function countLastRun(events: readonly ProfileEvent[]): RunCounts {
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
  const last = runs[runs.length - 1];
  if (!last || last.ts === undefined) throw new Error('profile has no model_run event');
  const start = last.ts;
  const end = start + (last.dur ?? 0);
  const inRun = (e: ProfileEvent) => e.ts !== undefined && e.ts >= start && e.ts <= end && !!e.name;
  const kernels: KernelRuns = { total: 0, byOp: {} };
  for (const e of events)
    if (inRun(e) && e.cat === 'Node' && e.name?.endsWith('_kernel_time'))
      tally(kernels, e.args?.op_name ?? 'unknown');
  const api = events.filter((e) => e.cat === 'Api' && e.name && e.ts !== undefined);
  let counted = api.filter(inRun);
  if (counted.length === 0 && api.length > 0) counted = lastRunByOrder(api, runs.length);
  const dispatches: KernelRuns = { total: 0, byOp: {} };
  const gpu: GpuTime = { totalUs: 0, byOpUs: {} };
  for (const e of counted) {
    const op = apiOp(e);
    tally(dispatches, op);
    const us = e.dur ?? 0;
    gpu.byOpUs[op] = (gpu.byOpUs[op] ?? 0) + us;
    gpu.totalUs += us;
  }
  return { kernels, dispatches, gpu };
}

/** What one profiled step ran: kernel runs (CPU EP) or dispatches (WebGPU), and on WebGPU their GPU time. */
export interface StepProfile {
  runs: KernelRuns;
  /** Null on the CPU EP. */
  gpu: GpuTime | null;
}

/**
 * Runs `onnx` twice on `feeds` with ORT's profiler on and reads the second run: GPU program dispatches and their
 * GPU time on WebGPU, kernel runs on the CPU EP. Session options match `createSession`'s for float32 (all
 * optimisations; no CPU fallback on WebGPU), so the count is the one a training session pays.
 */
export async function profileStep(
  onnx: Uint8Array,
  feeds: Record<string, ort.Tensor>,
  o: { device: 'webgpu' | 'cpu' },
): Promise<StepProfile> {
  const dir = mkdtempSync(join(tmpdir(), 'meshtrain-profile-'));
  try {
    if (o.device === 'webgpu') configureWebgpu();
    const session = await ort.InferenceSession.create(onnx, {
      executionProviders: [o.device],
      graphOptimizationLevel: 'all',
      enableProfiling: true,
      profileFilePrefix: join(dir, 'step'),
      ...(o.device === 'webgpu' ? { extra: { session: { disable_cpu_ep_fallback: '1' } } } : {}),
    });
    try {
      await session.run(feeds);
      await session.run(feeds);
      session.endProfiling();
    } finally {
      await session.release();
    }
    const file = readdirSync(dir).find((f) => f.endsWith('.json'));
    if (!file) throw new Error(`ORT wrote no profile under ${dir}`);
    const counts = countLastRun(JSON.parse(readFileSync(join(dir, file), 'utf8')) as ProfileEvent[]);
    if (o.device === 'cpu') return { runs: counts.kernels, gpu: null };
    if (counts.dispatches.total === 0)
      throw new Error(
        'the WebGPU EP wrote no dispatch events: it profiles its programs only on a device with timestamp queries',
      );
    return { runs: counts.dispatches, gpu: counts.gpu };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** profileStep's kernel runs (CPU EP) or GPU dispatches (WebGPU) of one step. */
export async function kernelRunsPerStep(
  onnx: Uint8Array,
  feeds: Record<string, ort.Tensor>,
  o: { device: 'webgpu' | 'cpu' },
): Promise<KernelRuns> {
  return (await profileStep(onnx, feeds, o)).runs;
}
