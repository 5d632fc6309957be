// Floating-point operations of a graph's contractions (MatMul, Gemm): the work a GPU's matrix kernels do, so a
// profile's time in those kernels becomes an achieved FLOP/s. Multiply and add count as two operations, as
// PyTorch's and vendors' figures do; Gemm's alpha and its added c are left out (m·n each, next to 2·m·n·k).
import { type Node, sizeOf } from './ir.ts';

function operand(n: Node, i: number): readonly number[] {
  const v = n.inputs[i];
  if (!v) throw new Error(`${n.op} node ${n.name} has no input ${i}`);
  return v.shape;
}

/** The ops that contract: their nodes' FLOPs are counted here, their programs' GPU time is matrix time. */
export const MATMUL_OPS: readonly string[] = ['MatMul', 'Gemm'];

/** 2·(output elements)·k for a MatMul or Gemm node; 0 for every other op. */
export function contractionFlops(n: Node): number {
  if (!MATMUL_OPS.includes(n.op)) return 0;
  const a = operand(n, 0);
  const out = n.outputs[0];
  if (!out) throw new Error(`${n.op} node ${n.name} has no output`);
  const transA = n.op === 'Gemm' && n.attrs.transA?.value === 1;
  const k = transA ? a[a.length - 2] : a[a.length - 1];
  if (k === undefined) throw new Error(`${n.op} node ${n.name}: operand of rank ${a.length}`);
  return 2 * sizeOf(out.shape) * k;
}

/** Sum of contractionFlops over `nodes`. */
export function matmulFlops(nodes: Iterable<Node>): number {
  let f = 0;
  for (const n of nodes) f += contractionFlops(n);
  return f;
}
