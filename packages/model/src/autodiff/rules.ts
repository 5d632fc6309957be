// Gradient rules, one per op: given the node and dL/d(output), return dL/d(input) for each input (null where
// an input is not differentiable or not needed). Every rule is written with builder ops that the WebGPU EP
// runs on the GPU; see the notes on Slice (zeros via Expand, not Pad) and Gather (token groups or a one-hot
// MatMul, not ScatterND-add, which is nondeterministic on the GPU).
import type { GraphBuilder } from '../graph/builder.ts';
import { GraphError } from '../graph/builder.ts';
import { type Node, type Shape, type Value, shapeEq, sizeOf } from '../graph/ir.ts';

export type GradRule = (
  b: GraphBuilder,
  node: Node,
  dy: Value,
  needs: readonly boolean[],
) => (Value | null)[];

/** A rule for an op with several outputs: `dys[i]` is dL/d(output i), null where no loss path reaches it. */
export type MultiGradRule = (
  b: GraphBuilder,
  node: Node,
  dys: readonly (Value | null)[],
  needs: readonly boolean[],
) => (Value | null)[];

/** Sums a broadcast gradient back down to the operand's shape. */
export function sumToShape(b: GraphBuilder, g: Value, shape: Shape): Value {
  if (shapeEq(g.shape, shape)) return g;
  const off = g.shape.length - shape.length;
  const axes: number[] = [];
  g.shape.forEach((d, i) => {
    if (i < off || (shape[i - off] === 1 && d !== 1)) axes.push(i);
  });
  return b.reshape(b.reduceSum(g, axes, true, 'unbroadcast'), shape);
}

function inputs(node: Node, n: number): Value[] {
  if (node.inputs.length < n) throw new GraphError(`${node.op}: expected ${n} inputs`);
  return node.inputs.slice(0, n) as Value[];
}

function intsOf(v: Value | undefined): number[] {
  if (!v?.data) throw new GraphError('expected a constant int input');
  return Array.from(v.data);
}

function intAttr(node: Node, name: string): number {
  const a = node.attrs[name];
  if (a?.type !== 'int') throw new GraphError(`${node.op}: missing int attribute ${name}`);
  return a.value;
}

function output(node: Node): Value {
  const y = node.outputs[0];
  if (!y) throw new GraphError(`${node.op}: no output`);
  return y;
}

function isLast2Swap(n: Node | null): boolean {
  const perm = n?.op === 'Transpose' && n.attrs.perm?.type === 'ints' ? n.attrs.perm.value : null;
  const r = perm?.length ?? 0;
  return !!perm && r >= 2 && perm.every((p, i) => p === (i === r - 2 ? r - 1 : i === r - 1 ? r - 2 : i));
}

function boolAttr(node: Node, name: string): boolean {
  const a = node.attrs[name];
  return a?.type === 'int' && a.value !== 0;
}

function floatAttr(node: Node, name: string, fallback: number): number {
  const a = node.attrs[name];
  return a?.type === 'float' ? a.value : fallback;
}

/**
 * Y = alpha · op(A) · op(B) + C with op = transpose where transA/transB say: both gradients are Gemms again (or
 * plain MatMuls), so no Transpose node appears in the backward pass of a Linear either; C's is dY itself.
 */
const gemmRule: GradRule = (b, node, dy, needs) => gemmGradients(b, node, dy, needs);

/**
 * The Gemm rule for dL/dY = `scale` · dy: the scale rides in the gradient Gemms' alpha, so a scaled dY is never
 * materialised (the cross-entropy's dLogits, whose 1/N would otherwise be a [tokens, vocab] Mul).
 */
export function gemmGradients(
  b: GraphBuilder,
  node: Node,
  dy: Value,
  needs: readonly boolean[],
  scale = 1,
): (Value | null)[] {
  const [A, B] = inputs(node, 2) as [Value, Value];
  const C = node.inputs[2];
  const ta = boolAttr(node, 'transA');
  const tb = boolAttr(node, 'transB');
  const alpha = floatAttr(node, 'alpha', 1) * scale;
  if (C && needs[2] && scale !== 1) throw new GraphError('gemmGradients: a scaled dY with a bias input');
  // dA = dY · op(B)ᵀ, or its transpose op(B) · dYᵀ when A was read transposed.
  const dA = !needs[0]
    ? null
    : ta
      ? b.gemm(B, dy, { transA: tb, transB: true, alpha }, 'dA')
      : b.gemm(dy, B, { transB: !tb, alpha }, 'dA');
  // dB = op(A)ᵀ · dY, or its transpose dYᵀ · op(A) when B was read transposed.
  const dB = !needs[1]
    ? null
    : tb
      ? b.gemm(dy, A, { transA: true, transB: ta, alpha }, 'dB')
      : b.gemm(A, dy, { transA: !ta, alpha }, 'dB');
  const dC = C && needs[2] ? sumToShape(b, dy, C.shape) : null;
  return [dA, dB, dC];
}

/**
 * RMSNorm y = x / r · w with r = √(mean(x²) + eps), over the last axis of x [N, D]:
 *   dw = Σ_rows dy ⊙ x/r,   dx = (g − x/r ⊙ mean(x/r ⊙ g)) / r  with g = dy ⊙ w.
 * r is recomputed (ReduceSumSquare, then one Gemm for Σx²/D + eps): SimplifiedLayerNormalization's own 1/r
 * output is not usable on the WebGPU EP. Row sums are MatMuls (a ReduceSum over leading axes is two
 * dispatches there), and mean(x/r ⊙ g) = (dy ⊙ x/r) · w / D is one Gemm.
 */
const rmsNormRule: GradRule = (b, node, dy, needs) => {
  const [x, w] = inputs(node, 2) as [Value, Value];
  const eps = floatAttr(node, 'epsilon', 1e-5);
  const d = w.shape[0] ?? 1;
  const rows = sizeOf(x.shape) / d;
  const x2 = b.reshape(x, [rows, d]);
  const dy2 = b.reshape(dy, [rows, d]);
  const one = b.constant([1], x.dtype, [1, 1], 'one');
  const meanSquare = b.gemm(b.reduceSumSquare(x2, [1], true, 'sum_square'), one, {
    alpha: 1 / d,
    c: b.constant([eps], x.dtype, [1], 'eps'),
  });
  const r = b.sqrt(meanSquare, 'rms');
  const n = b.div(x2, r, 'normalized');
  const p = b.mul(dy2, n, 'dy_n');
  const dw = needs[1]
    ? b.reshape(
        b.matmul(b.constant(new Array<number>(rows).fill(1), x.dtype, [1, rows], 'ones'), p),
        [d],
        'dw',
      )
    : null;
  let dx: Value | null = null;
  if (needs[0]) {
    const m = b.gemm(p, b.reshape(w, [d, 1]), { alpha: 1 / d }, 'mean_n_g');
    const g = b.mul(dy2, w, 'g');
    dx = b.reshape(b.div(b.sub(g, b.mul(n, m)), r, 'dx'), x.shape);
  }
  return [dx, dw];
};

/** y = x · σ(x): dy/dx = σ + y · (1 − σ), with σ recomputed. */
const siluRule: GradRule = (b, node, dy) => {
  if (floatAttr(node, 'alpha', 1.702) !== 1)
    throw new GraphError('QuickGelu: only alpha 1 (SiLU) has a rule');
  const x = inputs(node, 1)[0] as Value;
  const y = output(node);
  const s = b.sigmoid(x, 'sigmoid');
  return [b.mul(dy, b.add(s, b.mul(y, b.sub(b.scalar(1, x.dtype), s))), 'dx')];
};

/**
 * A rotation by θ per position (times the caches' scale): its gradient is the rotation by −θ, the same op
 * with the sine cache negated.
 */
const rotaryRule: GradRule = (b, node, dy) => {
  const [, positions, cos, sin] = inputs(node, 4) as [Value, Value, Value, Value];
  if (!sin.data) throw new GraphError('RotaryEmbedding: the sine cache must be a constant');
  const negSin = b.constant(
    Array.from(sin.data, (v) => -v),
    sin.dtype,
    sin.shape,
    'neg_sin',
  );
  return [b.rotaryEmbedding(dy, positions, cos, negSin, 'dx'), null, null, null];
};

const matmulRule: GradRule = (b, node, dy, needs) => {
  const [A, B] = inputs(node, 2) as [Value, Value];
  const k = A.shape[A.shape.length - 1] ?? 0;
  const n = B.shape[B.shape.length - 1] ?? 0;
  if (B.shape.length === 2) {
    // Activations [..., m, k] times a weight matrix: flatten the batch so dB is one [k, n] MatMul rather than
    // a batch of them summed afterwards.
    const rows = sizeOf(A.shape) / k;
    const A2 = b.reshape(A, [rows, k]);
    const dy2 = b.reshape(dy, [rows, n]);
    const dA = needs[0] ? b.reshape(b.matmul(dy2, b.transpose(B, [1, 0]), 'dA'), A.shape) : null;
    let dB: Value | null = null;
    if (needs[1]) {
      // When B is itself Transpose(W) (x @ Wᵀ, PyTorch Linear layout), compute dBᵀ = dyᵀ A directly: the
      // Transpose rule's transpose then cancels against ours and dW needs no transpose at all.
      dB =
        B.producer?.op === 'Transpose'
          ? b.transpose(b.matmul(b.transpose(dy2, [1, 0]), A2, 'dB_t'), [1, 0])
          : b.matmul(b.transpose(A2, [1, 0]), dy2, 'dB');
    }
    return [dA, dB];
  }
  const dA = needs[0] ? sumToShape(b, b.matmul(dy, b.transposeLast2(B), 'dA'), A.shape) : null;
  let dB: Value | null = null;
  if (needs[1]) {
    // B = Kᵀ (a transposed batch of matrices, as attention scores use it): dBᵀ = dyᵀ A needs one Transpose
    // (of dy), and its transpose back cancels against the Transpose rule's, so dK needs none.
    dB =
      isLast2Swap(B.producer) &&
      shapeEq(dy.shape.slice(0, -2), B.shape.slice(0, -2)) &&
      shapeEq(A.shape.slice(0, -2), B.shape.slice(0, -2))
        ? b.transposeLast2(b.matmul(b.transposeLast2(dy), A, 'dB_t'))
        : sumToShape(b, b.matmul(b.transposeLast2(A), dy, 'dB'), B.shape);
  }
  return [dA, dB];
};

export const GRAD_RULES: Record<string, GradRule> = {
  Add: (b, node, dy) => {
    const [x, y] = inputs(node, 2) as [Value, Value];
    return [sumToShape(b, dy, x.shape), sumToShape(b, dy, y.shape)];
  },
  Sub: (b, node, dy, needs) => {
    const [x, y] = inputs(node, 2) as [Value, Value];
    return [sumToShape(b, dy, x.shape), needs[1] ? sumToShape(b, b.neg(dy), y.shape) : null];
  },
  Mul: (b, node, dy, needs) => {
    const [x, y] = inputs(node, 2) as [Value, Value];
    return [
      needs[0] ? sumToShape(b, b.mul(dy, y, 'dA'), x.shape) : null,
      needs[1] ? sumToShape(b, b.mul(dy, x, 'dB'), y.shape) : null,
    ];
  },
  Div: (b, node, dy, needs) => {
    // z = x / y: dx = dy / y, dy_ = -dy · z / y (reuses z instead of squaring y).
    const [x, y] = inputs(node, 2) as [Value, Value];
    const z = output(node);
    return [
      needs[0] ? sumToShape(b, b.div(dy, y, 'dA'), x.shape) : null,
      needs[1] ? sumToShape(b, b.neg(b.div(b.mul(dy, z), y), 'dB'), y.shape) : null,
    ];
  },
  Neg: (b, _node, dy) => [b.neg(dy)],
  Identity: (_b, _node, dy) => [dy],
  Exp: (b, node, dy) => [b.mul(dy, output(node), 'dx')],
  Log: (b, node, dy) => [b.div(dy, inputs(node, 1)[0] as Value, 'dx')],
  Sqrt: (b, node, dy) => {
    const y = output(node);
    return [b.div(dy, b.add(y, y), 'dx')]; // d√x = 1 / (2√x)
  },
  Sigmoid: (b, node, dy) => {
    const y = output(node);
    return [b.mul(dy, b.mul(y, b.sub(b.scalar(1, y.dtype), y)), 'dx')];
  },
  Cast: (b, node, dy) => [b.cast(dy, (inputs(node, 1)[0] as Value).dtype)],
  Reshape: (b, node, dy) => [b.reshape(dy, (inputs(node, 1)[0] as Value).shape), null],
  Transpose: (b, node, dy) => {
    const perm = node.attrs.perm?.type === 'ints' ? node.attrs.perm.value : [];
    const inv = new Array<number>(perm.length);
    perm.forEach((p, i) => (inv[p] = i));
    return [b.transpose(dy, inv)];
  },
  Expand: (b, node, dy) => [sumToShape(b, dy, (inputs(node, 1)[0] as Value).shape), null],
  Slice: (b, node, dy) => {
    // Scatter dy back into a zero tensor with Concat: Pad is not on the WebGPU EP's list
    // (docs/architecture.md "Runtime notes").
    const x = inputs(node, 1)[0] as Value;
    const [start] = intsOf(node.inputs[1]);
    const [end] = intsOf(node.inputs[2]);
    const [axis] = intsOf(node.inputs[3]);
    if (start === undefined || end === undefined || axis === undefined)
      throw new GraphError('Slice: bad constants');
    const dim = x.shape[axis] ?? 0;
    const piece = (len: number) =>
      b.zeros(
        x.shape.map((d, i) => (i === axis ? len : d)),
        x.dtype,
      );
    const parts: Value[] = [];
    if (start > 0) parts.push(piece(start));
    parts.push(dy);
    if (end < dim) parts.push(piece(dim - end));
    return [b.concat(parts, axis, 'dx'), null, null, null];
  },
  Concat: (b, node, dy, needs) => {
    const axis = intAttr(node, 'axis');
    // One Split when every piece needs its gradient (the usual case: weights fused for one MatMul).
    if (needs.every((n) => n))
      return b.split(
        dy,
        axis,
        node.inputs.map((x) => x.shape[axis] ?? 0),
        'dx',
      );
    let at = 0;
    return node.inputs.map((x, k) => {
      const len = x.shape[axis] ?? 0;
      const g = needs[k] ? b.slice(dy, axis, at, at + len, `d${k}`) : null;
      at += len;
      return g;
    });
  },
  MatMul: matmulRule,
  Gemm: gemmRule,
  SimplifiedLayerNormalization: rmsNormRule,
  QuickGelu: siluRule,
  RotaryEmbedding: rotaryRule,
  ReduceSum: (b, node, dy) => {
    const x = inputs(node, 1)[0] as Value;
    const axes = intsOf(node.inputs[1]);
    const kept = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
    return [b.expand(b.reshape(dy, kept), x.shape, 'dx'), null];
  },
  ReduceMean: (b, node, dy) => {
    const x = inputs(node, 1)[0] as Value;
    const axes = intsOf(node.inputs[1]);
    const kept = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
    const count = axes.reduce((n, a) => n * (x.shape[a] ?? 1), 1);
    const scaled = b.mul(b.reshape(dy, kept), b.scalar(1 / count, dy.dtype));
    return [b.expand(scaled, x.shape, 'dx'), null];
  },
  Softmax: (b, node, dy) => {
    // dx = y ⊙ (dy − Σ_axis dy ⊙ y)
    const y = output(node);
    const axis = intAttr(node, 'axis');
    const dot = b.reduceSum(b.mul(dy, y), [axis], true, 'dot');
    return [b.mul(y, b.sub(dy, dot), 'dx')];
  },
  Gather: (b, node, dy, needs) => {
    // Embedding backward without ScatterND-add (atomic float adds in arbitrary order on the WebGPU EP): dense
    // MatMuls and scatters that write each index once, deterministic and GPU-resident.
    const [data, ids] = inputs(node, 2) as [Value, Value];
    if (!needs[0]) return [null, null];
    const rows = data.shape[0] ?? 0;
    const n = sizeOf(ids.shape);
    const width = sizeOf(data.shape) / rows;
    const dyFlat = b.reshape(dy, [n, width]);
    const dData =
      n < rows ? tokenGroupGrad(b, ids, dyFlat, rows) : oneHotGrad(b, ids, dyFlat, rows, data.dtype);
    return [b.reshape(dData, data.shape), null];
  },
};

/**
 * d(table) as onehot(ids)ᵀ · dy, [rows, n] · [n, width]: for fewer rows than tokens. The one-hot is Equal
 * against an int32 arange and a Cast (OneHot itself runs on the CPU under WebGPU).
 */
function oneHotGrad(b: GraphBuilder, ids: Value, dy: Value, rows: number, dtype: Value['dtype']): Value {
  const n = dy.shape[0] ?? 0;
  const arange = b.constant(
    Array.from({ length: rows }, (_, i) => i),
    'int32',
    [rows, 1],
    'arange',
  );
  const onehotT = b.cast(b.equal(arange, b.reshape(ids, [1, n]), 'onehot_t'), dtype);
  return b.matmul(onehotT, dy, 'ddata');
}

/**
 * d(table) for fewer tokens than rows (a vocabulary): n × n work instead of rows × n. same[i][j] says
 * whether tokens i and j are equal; same · dy gives every position its token's total; the first position of
 * each token scatters that total to the token's row, and every later one to a row past the table, sliced off,
 * so each index is written once.
 */
function tokenGroupGrad(b: GraphBuilder, ids: Value, dy: Value, rows: number): Value {
  const [n, width] = dy.shape as [number, number];
  const dtype = dy.dtype;
  const column = b.reshape(ids, [n, 1]);
  const same = b.cast(b.equal(column, b.reshape(ids, [1, n]), 'same_token'), dtype);
  const totals = b.matmul(same, dy, 'token_totals');
  const positions = b.constant(
    Array.from({ length: n }, (_, i) => i),
    dtype,
    [n, 1],
    'positions',
  );
  // n − j for each column j: the row's largest same[i][j]·(n − j) names its first position j.
  const rank = b.constant(
    Array.from({ length: n }, (_, j) => n - j),
    dtype,
    [1, n],
    'rank',
  );
  const first = b.sub(b.scalar(n, dtype), b.reduceMaxNoGrad(b.mul(same, rank), [1], true), 'first');
  const isFirst = b.cast(b.equal(first, positions, 'is_first'), dtype);
  const past = b.add(positions, b.scalar(rows, dtype), 'past_table');
  const target = b.add(past, b.mul(isFirst, b.sub(b.cast(column, dtype), past)), 'target');
  const index = b.expand(b.cast(target, 'int32'), [n, width], 'target_index');
  // Zeros computed from `same` (its max is exactly 1), not a constant: with constant zeros, which ORT folds into
  // an initializer, graph-captured replays returned an all-zero gradient (resident-gpu.test.ts) — copying an
  // initializer into ScatterElements' output is a buffer copy, which capture does not replay.
  const one = b.reduceMaxNoGrad(same, [0, 1], true, 'one');
  const zeros = b.expand(b.sub(one, one, 'zero'), [rows + n, width], 'zeros');
  const scattered = b.scatterElements(zeros, index, totals, 0, 'ddata');
  return b.slice(scattered, 0, 0, rows, 'ddata_rows');
}

export const MULTI_OUTPUT_RULES: Record<string, MultiGradRule> = {
  Split: (b, node, dys) => {
    // dx = the output gradients concatenated back, zeros for pieces no loss path reaches.
    const axis = intAttr(node, 'axis');
    const x = inputs(node, 1)[0] as Value;
    const parts = node.outputs.map((y, i) => dys[i] ?? b.zeros(y.shape, x.dtype));
    return [b.concat(parts, axis, 'dx'), null];
  },
};
