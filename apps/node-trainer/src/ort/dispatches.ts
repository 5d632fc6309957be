// Kernel runs per step, counted from ONNX Runtime's own profiler: one session with `enableProfiling`, one warm-up
// run (first-run allocations and shader compiles), one counted run, then the JSON profile is parsed.
//
// Two kinds of events describe the counted run (the one inside the last `model_run` span). ORT's executor writes
// a `Node` event `<node>_kernel_time` per kernel it runs, on every EP. The WebGPU EP additionally writes an `Api`
// event `<node>&<op>&<program>` per compute program it dispatches, and the two differ: a Reshape kernel aliases
// its input and dispatches nothing, while a ReduceSum over leading axes dispatches a Transpose program and a
// reduction (measured on SwiftShader, ORT 1.30: a 1-layer micro train step ran 223 kernels, 207 dispatches).
// On WebGPU the dispatches are what a step pays per kernel launch, so they are what is counted there.
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

export interface RunCounts {
  /** `Node` kernel-run events, per op type. */
  kernels: KernelRuns;
  /** WebGPU `Api` program-dispatch events, per op type of the node that dispatched them (empty on other EPs). */
  dispatches: KernelRuns;
}

function tally(into: KernelRuns, op: string): void {
  into.byOp[op] = (into.byOp[op] ?? 0) + 1;
  into.total++;
}

/** Counts the kernel runs and GPU dispatches that started inside the last `model_run` span of `events`. */
export function countLastRun(events: readonly ProfileEvent[]): RunCounts {
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
  const last = runs[runs.length - 1];
  if (!last || last.ts === undefined) throw new Error('profile has no model_run event');
  const start = last.ts;
  const end = start + (last.dur ?? 0);
  const kernels: KernelRuns = { total: 0, byOp: {} };
  const dispatches: KernelRuns = { total: 0, byOp: {} };
  for (const e of events) {
    if (e.ts === undefined || e.ts < start || e.ts > end || !e.name) continue;
    if (e.cat === 'Node' && e.name.endsWith('_kernel_time')) tally(kernels, e.args?.op_name ?? 'unknown');
    else if (e.cat === 'Api') tally(dispatches, e.name.split('&')[1] ?? 'unknown');
  }
  return { kernels, dispatches };
}

/**
 * Runs `onnx` twice on `feeds` with ORT's profiler on and counts the second run: GPU program dispatches on
 * WebGPU, kernel runs on the CPU EP. Session
 * options match `createSession`'s for float32 (all optimisations; no CPU fallback on WebGPU), so the count is the
 * one a training session pays.
 */
export async function kernelRunsPerStep(
  onnx: Uint8Array,
  feeds: Record<string, ort.Tensor>,
  o: { device: 'webgpu' | 'cpu' },
): Promise<{ total: number; byOp: Record<string, number> }> {
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
    if (o.device === 'cpu') return counts.kernels;
    if (counts.dispatches.total === 0)
      throw new Error('the WebGPU EP wrote no dispatch events: this ORT build does not profile its programs');
    return counts.dispatches;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
