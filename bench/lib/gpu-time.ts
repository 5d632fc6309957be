// Where a profiled train step's GPU time goes: ORT's per-dispatch GPU time (timestamp queries) summed per op,
// and the matmul kernels' achieved FLOP/s from the graph's contraction FLOPs, so a run on a real GPU says how
// much of a step is matrix work and how fast ORT's matrix kernels run it.
import { MATMUL_OPS } from '@meshtrain/model';
import type { GpuTime } from '../../apps/node-trainer/src/ort/dispatches.ts';

export interface GpuTimeSummary {
  total_ms: number;
  /** GPU time of MatMul and Gemm programs. */
  matmul_ms: number;
  /** matmul_ms / total_ms. */
  matmul_share: number;
  matmul_gflop: number;
  /** matmul_gflop over matmul_ms; null when no matmul time was recorded. */
  matmul_gflop_per_s: number | null;
  /** Per op type, most first. */
  by_op_ms: Record<string, number>;
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

export function summarizeGpuTime(gpu: GpuTime, matmulFlops: number): GpuTimeSummary {
  const matmulUs = MATMUL_OPS.reduce((a, op) => a + (gpu.byOpUs[op] ?? 0), 0);
  const rate = matmulUs > 0 ? matmulFlops / 1e9 / (matmulUs / 1e6) : null;
  return {
    total_ms: round(gpu.totalUs / 1000, 3),
    matmul_ms: round(matmulUs / 1000, 3),
    matmul_share: gpu.totalUs > 0 ? round(matmulUs / gpu.totalUs, 3) : 0,
    matmul_gflop: round(matmulFlops / 1e9, 3),
    matmul_gflop_per_s: rate === null ? null : round(rate, rate >= 100 ? 0 : 3),
    by_op_ms: Object.fromEntries(
      Object.entries(gpu.byOpUs)
        .sort((a, b) => b[1] - a[1])
        .map(([op, us]) => [op, round(us / 1000, 3)]),
    ),
  };
}
