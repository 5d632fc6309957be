// GraphBuilder: creates values and nodes with their static shapes inferred on the spot, folds constant
// subexpressions and trivial identities as it goes, and names everything after the scope it was built in.
// It knows ONNX op semantics (opset 18) but nothing about any model.
import {
  type Attr,
  type DType,
  type Node,
  type Shape,
  type Value,
  fmtShape,
  isFloat,
  shapeEq,
  sizeOf,
} from './ir.ts';

/** ORT's contrib operator domain (QuickGelu, RotaryEmbedding, ...). */
export const CONTRIB_DOMAIN = 'com.microsoft';

/** ONNX TensorProto.DataType codes. */
export const ONNX_DTYPE: Record<DType, number> = { float32: 1, int32: 6, int64: 7, bool: 9, float64: 11 };

/** Folding bigger constants would only bloat the model file; ORT computes those at load time anyway. */
const FOLD_LIMIT = 4096;
/** Small constants (shapes, axes, scalars) are shared instead of emitted once per use. */
const DEDUP_LIMIT = 64;

/**
 * A gradient written by hand for a group of nodes (`GraphBuilder.withGradient`): given dL/d(output), dL/d each
 * of `inputs` (null where not needed), built with builder ops when autodiff reaches the group's output.
 */
export interface CustomGradient {
  readonly inputs: readonly Value[];
  readonly rule: (dy: Value, needs: readonly boolean[]) => (Value | null)[];
}

export class GraphError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GraphError';
  }
}

export function broadcastShapes(a: Shape, b: Shape): number[] {
  const n = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const da = a[a.length - n + i] ?? 1;
    const db = b[b.length - n + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1)
      throw new GraphError(`shapes ${fmtShape(a)} and ${fmtShape(b)} do not broadcast`);
    out.push(da === 1 ? db : da);
  }
  return out;
}

function strides(shape: Shape): number[] {
  const s = new Array<number>(shape.length).fill(1);
  for (let i = shape.length - 2; i >= 0; i--) s[i] = (s[i + 1] ?? 1) * (shape[i + 1] ?? 1);
  return s;
}

/** Flat index into a tensor of `from` shape for each element of the (broadcast) `to` shape. */
function broadcastIndex(from: Shape, to: Shape): Int32Array {
  const n = sizeOf(to);
  const idx = new Int32Array(n);
  const fs = strides(from);
  const off = to.length - from.length;
  const ts = strides(to);
  for (let i = 0; i < n; i++) {
    let src = 0;
    for (let d = 0; d < to.length; d++) {
      const coord = Math.floor(i / (ts[d] ?? 1)) % (to[d] ?? 1);
      const fd = d - off;
      if (fd >= 0 && (from[fd] ?? 1) !== 1) src += coord * (fs[fd] ?? 0);
    }
    idx[i] = src;
  }
  return idx;
}

function roundTo(dtype: DType, x: number): number {
  switch (dtype) {
    case 'float32':
      return Math.fround(x);
    case 'float64':
      return x;
    case 'int32':
      return x | 0;
    case 'int64':
      return Math.trunc(x);
    case 'bool':
      return x !== 0 ? 1 : 0;
  }
}

function normAxis(axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) throw new GraphError(`axis ${axis} out of range for rank ${rank}`);
  return a;
}

type Unary = 'Neg' | 'Exp' | 'Log' | 'Sqrt' | 'Sigmoid' | 'Identity';
type Binary = 'Add' | 'Sub' | 'Mul' | 'Div' | 'Equal';

const UNARY_FN: Record<Unary, (x: number) => number> = {
  Neg: (x) => -x,
  Exp: Math.exp,
  Log: Math.log,
  Sqrt: Math.sqrt,
  Sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  Identity: (x) => x,
};
const BINARY_FN: Record<Binary, (a: number, b: number) => number> = {
  Add: (a, b) => a + b,
  Sub: (a, b) => a - b,
  Mul: (a, b) => a * b,
  Div: (a, b) => a / b,
  Equal: (a, b) => (a === b ? 1 : 0),
};

export class GraphBuilder {
  readonly nodes: Node[] = [];
  readonly inputs: Value[] = [];
  readonly outputs: Value[] = [];
  private readonly names = new Set<string>();
  private readonly scopes: string[] = [];
  private readonly constCache = new Map<string, Value>();
  /** Hand-written gradients by the id of the node that produces the group's output. */
  readonly customGradients = new Map<number, CustomGradient>();
  /** Set while a `withGradient` group is built: its nodes are constants to autodiff. */
  private inGradientGroup = false;
  private nextValueId = 0;
  private nextNodeId = 0;

  /** Runs `fn` with `name` appended to the naming scope: nodes read `layers.0/attn/q_proj`. */
  scope<T>(name: string, fn: () => T): T {
    this.scopes.push(name);
    try {
      return fn();
    } finally {
      this.scopes.pop();
    }
  }

  private unique(base: string): string {
    let name = base;
    for (let i = 1; this.names.has(name); i++) name = `${base}_${i}`;
    this.names.add(name);
    return name;
  }

  private scoped(label: string): string {
    return this.scopes.length ? `${this.scopes.join('/')}/${label}` : label;
  }

  private value(
    name: string,
    dtype: DType,
    shape: Shape,
    producer: Node | null,
    data: Float64Array | null,
    isInput = false,
  ): Value {
    return { id: this.nextValueId++, name, dtype, shape: [...shape], producer, data, isInput };
  }

  input(name: string, dtype: DType, shape: Shape): Value {
    if (this.names.has(name)) throw new GraphError(`duplicate value name '${name}'`);
    this.names.add(name);
    const v = this.value(name, dtype, shape, null, null, true);
    this.inputs.push(v);
    return v;
  }

  /** A constant initializer. Values are rounded to `dtype` here, so folding sees the same numbers ORT will. */
  constant(data: ArrayLike<number>, dtype: DType, shape: Shape, label = 'const'): Value {
    if (data.length !== sizeOf(shape))
      throw new GraphError(`constant '${label}': ${data.length} values for shape ${fmtShape(shape)}`);
    const rounded = Float64Array.from(data, (x) => roundTo(dtype, x));
    let key: string | null = null;
    if (rounded.length <= DEDUP_LIMIT) {
      key = `${dtype}|${shape.join(',')}|${Array.from(rounded).join(',')}`;
      const hit = this.constCache.get(key);
      if (hit) return hit;
    }
    const v = this.value(this.unique(this.scoped(label)), dtype, shape, null, rounded);
    if (key) this.constCache.set(key, v);
    return v;
  }

  scalar(x: number, dtype: DType): Value {
    return this.constant([x], dtype, [], `scalar_${dtype}_${x}`.replace(/[^A-Za-z0-9_.-]/g, '_'));
  }

  /** int64 vectors for shape/axes/starts inputs: the one place int64 is allowed (constant initializers). */
  int64s(xs: readonly number[], label: string): Value {
    return this.constant(xs, 'int64', [xs.length], label);
  }

  private node(
    op: string,
    inputs: Value[],
    outs: { dtype: DType; shape: Shape }[],
    attrs: Record<string, Attr>,
    label: string,
    stopGradient = false,
    domain = '',
  ): Value[] {
    const name = this.unique(this.scoped(label));
    const outputs: Value[] = [];
    const stop = stopGradient || this.inGradientGroup;
    const node: Node = {
      id: this.nextNodeId++,
      name,
      op,
      domain,
      inputs,
      outputs,
      attrs,
      stopGradient: stop,
    };
    outs.forEach((o, i) => {
      const vname = outs.length === 1 ? name : this.unique(`${name}:${i}`);
      outputs.push(this.value(vname, o.dtype, o.shape, node, null));
    });
    this.nodes.push(node);
    return outputs;
  }

  private node1(
    op: string,
    inputs: Value[],
    dtype: DType,
    shape: Shape,
    attrs: Record<string, Attr>,
    label: string,
    stop = false,
  ): Value {
    const [v] = this.node(op, inputs, [{ dtype, shape }], attrs, label, stop);
    if (!v) throw new GraphError('unreachable');
    return v;
  }

  /** Declares a graph output under its public name (renaming the value, or through an Identity if it has one). */
  output(v: Value, name: string): Value {
    let out = v;
    if (v.producer === null || this.outputs.includes(v))
      out = this.node1('Identity', [v], v.dtype, v.shape, {}, name);
    if (out.name !== name) {
      if (this.names.has(name)) throw new GraphError(`output name '${name}' already used`);
      this.names.delete(out.name);
      this.names.add(name);
      out.name = name;
    }
    this.outputs.push(out);
    return out;
  }

  // ---- elementwise -------------------------------------------------------------------------------------------

  private unary(op: Unary, x: Value, label?: string, stop = false): Value {
    if (!isFloat(x.dtype)) throw new GraphError(`${op} needs a float input, got ${x.dtype}`);
    if (x.data && sizeOf(x.shape) <= FOLD_LIMIT && !stop) {
      const f = UNARY_FN[op];
      return this.constant(Array.from(x.data, f), x.dtype, x.shape, label ?? op.toLowerCase());
    }
    return this.node1(op, [x], x.dtype, x.shape, {}, label ?? op, stop);
  }

  neg(x: Value, label?: string): Value {
    return this.unary('Neg', x, label);
  }
  exp(x: Value, label?: string): Value {
    return this.unary('Exp', x, label);
  }
  log(x: Value, label?: string): Value {
    return this.unary('Log', x, label);
  }
  sqrt(x: Value, label?: string): Value {
    return this.unary('Sqrt', x, label);
  }
  sigmoid(x: Value, label?: string): Value {
    return this.unary('Sigmoid', x, label);
  }
  /**
   * Builds a group of nodes whose gradient is `rule` rather than the chain of its ops' rules: autodiff treats
   * the nodes `build` creates as constants and, at the group's output, calls `rule` to get the gradients of
   * `inputs`. For compositions whose chained rules would build more (or larger) temporaries than a fused
   * formula, such as cross-entropy's softmax − one-hot.
   */
  withGradient(inputs: readonly Value[], build: () => Value, rule: CustomGradient['rule']): Value {
    if (this.inGradientGroup) throw new GraphError('withGradient: groups do not nest');
    const first = this.nextNodeId;
    this.inGradientGroup = true;
    let y: Value;
    try {
      y = build();
    } finally {
      this.inGradientGroup = false;
    }
    if (!y.producer || y.producer.id < first)
      throw new GraphError('withGradient: the output must be computed by a node of the group');
    this.customGradients.set(y.producer.id, { inputs, rule });
    return y;
  }

  /** Identity whose output autodiff treats as a constant (`x.detach()`). */
  stopGradient(x: Value, label = 'stop_gradient'): Value {
    return this.unary('Identity', x, label, true);
  }

  private binary(op: Binary, a: Value, b: Value, label?: string): Value {
    if (a.dtype !== b.dtype) throw new GraphError(`${op}: dtypes ${a.dtype} and ${b.dtype} differ`);
    const shape = broadcastShapes(a.shape, b.shape);
    const outDtype: DType = op === 'Equal' ? 'bool' : a.dtype;
    if (a.data && b.data && sizeOf(shape) <= FOLD_LIMIT) {
      const ia = broadcastIndex(a.shape, shape);
      const ib = broadcastIndex(b.shape, shape);
      const f = BINARY_FN[op];
      const ad = a.data;
      const bd = b.data;
      const out = Array.from(ia, (ai, i) => f(ad[ai] ?? NaN, bd[ib[i] ?? 0] ?? NaN));
      return this.constant(out, outDtype, shape, label ?? op.toLowerCase());
    }
    // x+0, x-0, x*1, x/1 with no broadcasting are x itself: autodiff seeds produce these.
    const neutral = op === 'Mul' || op === 'Div' ? 1 : op === 'Equal' ? null : 0;
    const isNeutral = (v: Value) => neutral !== null && v.data !== null && v.data.every((x) => x === neutral);
    if (isNeutral(b) && shapeEq(shape, a.shape)) return a;
    if ((op === 'Add' || op === 'Mul') && isNeutral(a) && shapeEq(shape, b.shape)) return b;
    return this.node1(op, [a, b], outDtype, shape, {}, label ?? op);
  }

  add(a: Value, b: Value, label?: string): Value {
    return this.binary('Add', a, b, label);
  }
  sub(a: Value, b: Value, label?: string): Value {
    return this.binary('Sub', a, b, label);
  }
  mul(a: Value, b: Value, label?: string): Value {
    return this.binary('Mul', a, b, label);
  }
  div(a: Value, b: Value, label?: string): Value {
    return this.binary('Div', a, b, label);
  }
  /** Elementwise equality → bool (f32/i32 inputs run on the WebGPU EP; int64 would fall back to CPU). */
  equal(a: Value, b: Value, label?: string): Value {
    if (a.dtype === 'int64')
      throw new GraphError('Equal on int64 falls back to the CPU on WebGPU: use int32');
    return this.binary('Equal', a, b, label);
  }

  cast(x: Value, to: DType, label?: string): Value {
    if (x.dtype === to) return x;
    if (x.dtype === 'int64') throw new GraphError('Cast from int64 falls back to the CPU on WebGPU');
    if (x.data && sizeOf(x.shape) <= FOLD_LIMIT) return this.constant(x.data, to, x.shape, label ?? 'cast');
    return this.node1(
      'Cast',
      [x],
      to,
      x.shape,
      { to: { type: 'int', value: ONNX_DTYPE[to] } },
      label ?? `Cast_${to}`,
    );
  }

  // ---- layout ------------------------------------------------------------------------------------------------

  reshape(x: Value, shape: readonly number[], label?: string): Value {
    if (shape.some((d) => d < 0 || !Number.isInteger(d)))
      throw new GraphError(`reshape: static shapes only, got ${fmtShape(shape)}`);
    if (sizeOf(shape) !== sizeOf(x.shape))
      throw new GraphError(`reshape ${fmtShape(x.shape)} → ${fmtShape(shape)}: sizes differ`);
    if (shapeEq(shape, x.shape)) return x;
    if (x.data) return this.constant(x.data, x.dtype, shape, label ?? 'reshape');
    // Reshape of a reshape is one reshape.
    const src = x.producer?.op === 'Reshape' && x.producer.inputs[0] ? x.producer.inputs[0] : x;
    if (src !== x && shapeEq(shape, src.shape)) return src;
    return this.node1('Reshape', [src, this.int64s(shape, 'shape')], x.dtype, shape, {}, label ?? 'Reshape');
  }

  transpose(x: Value, perm: readonly number[], label?: string): Value {
    if (perm.length !== x.shape.length || [...perm].sort().some((p, i) => p !== i))
      throw new GraphError(`transpose: bad perm [${perm.join(',')}] for rank ${x.shape.length}`);
    if (perm.every((p, i) => p === i)) return x;
    const shape = perm.map((p) => x.shape[p] ?? 0);
    if (x.data && sizeOf(shape) <= FOLD_LIMIT) {
      const xs = strides(x.shape);
      const os = strides(shape);
      const data = x.data;
      const out = Array.from({ length: sizeOf(shape) }, (_, i) => {
        let src = 0;
        perm.forEach((p, d) => (src += (Math.floor(i / (os[d] ?? 1)) % (shape[d] ?? 1)) * (xs[p] ?? 0)));
        return data[src] ?? NaN;
      });
      return this.constant(out, x.dtype, shape, label ?? 'transpose');
    }
    const inner = x.producer?.op === 'Transpose' ? x.producer : null;
    if (inner && !x.data) {
      const innerPerm = inner.attrs.perm?.type === 'ints' ? inner.attrs.perm.value : null;
      const src = inner.inputs[0];
      if (innerPerm && src)
        return this.transpose(
          src,
          perm.map((p) => innerPerm[p] ?? 0),
          label,
        );
    }
    return this.node1(
      'Transpose',
      [x],
      x.dtype,
      shape,
      { perm: { type: 'ints', value: [...perm] } },
      label ?? 'Transpose',
    );
  }

  /** Swaps the last two axes (the matrix transpose of a batch of matrices). */
  transposeLast2(x: Value, label?: string): Value {
    const r = x.shape.length;
    const perm = x.shape.map((_, i) => (i === r - 2 ? r - 1 : i === r - 1 ? r - 2 : i));
    return this.transpose(x, perm, label);
  }

  expand(x: Value, shape: readonly number[], label?: string): Value {
    const out = broadcastShapes(x.shape, shape);
    if (!shapeEq(out, shape))
      throw new GraphError(`expand ${fmtShape(x.shape)} → ${fmtShape(shape)}: not a broadcast`);
    if (shapeEq(x.shape, shape)) return x;
    return this.node1('Expand', [x, this.int64s(shape, 'shape')], x.dtype, shape, {}, label ?? 'Expand');
  }

  /** A zero tensor as Expand(scalar 0): ConstantOfShape would run on the CPU, and big zero initializers bloat files. */
  zeros(shape: readonly number[], dtype: DType, label = 'zeros'): Value {
    if (sizeOf(shape) <= DEDUP_LIMIT)
      return this.constant(new Array<number>(sizeOf(shape)).fill(0), dtype, shape, label);
    return this.node1(
      'Expand',
      [this.scalar(0, dtype), this.int64s(shape, 'shape')],
      dtype,
      shape,
      {},
      label,
    );
  }

  /** x[..., start:end, ...] along one axis (step 1). */
  slice(x: Value, axis: number, start: number, end: number, label?: string): Value {
    // Found by the placement test: ORT 1.30's WebGPU EP has no int32 Slice kernel (a CPU fallback).
    if (!isFloat(x.dtype))
      throw new GraphError(`slice of ${x.dtype} runs on the CPU under WebGPU: gather instead`);
    const a = normAxis(axis, x.shape.length);
    const dim = x.shape[a] ?? 0;
    if (!(0 <= start && start < end && end <= dim))
      throw new GraphError(`slice [${start}:${end}] out of range for dim ${dim}`);
    if (start === 0 && end === dim) return x;
    const shape = x.shape.map((d, i) => (i === a ? end - start : d));
    return this.node1(
      'Slice',
      [x, this.int64s([start], 'starts'), this.int64s([end], 'ends'), this.int64s([a], 'axes')],
      x.dtype,
      shape,
      {},
      label ?? 'Slice',
    );
  }

  concat(xs: Value[], axis: number, label?: string): Value {
    const first = xs[0];
    if (!first) throw new GraphError('concat of nothing');
    const a = normAxis(axis, first.shape.length);
    let total = 0;
    for (const x of xs) {
      if (
        x.dtype !== first.dtype ||
        x.shape.length !== first.shape.length ||
        x.shape.some((d, i) => i !== a && d !== first.shape[i])
      )
        throw new GraphError(
          `concat: ${fmtShape(x.shape)} does not match ${fmtShape(first.shape)} off axis ${a}`,
        );
      total += x.shape[a] ?? 0;
    }
    if (xs.length === 1) return first;
    const shape = first.shape.map((d, i) => (i === a ? total : d));
    return this.node1(
      'Concat',
      xs,
      first.dtype,
      shape,
      { axis: { type: 'int', value: a } },
      label ?? 'Concat',
    );
  }

  /** Splits `x` along `axis` into pieces of the given sizes: one Split node (its gradient is one Concat). */
  split(x: Value, axis: number, sizes: readonly number[], label?: string): Value[] {
    const a = normAxis(axis, x.shape.length);
    if (sizes.reduce((s, d) => s + d, 0) !== x.shape[a] || sizes.some((d) => !(d > 0)))
      throw new GraphError(`split of dim ${x.shape[a]} into [${sizes.join(',')}]`);
    if (sizes.length === 1) return [x];
    return this.node(
      'Split',
      [x, this.int64s(sizes, 'split')],
      sizes.map((d) => ({ dtype: x.dtype, shape: x.shape.map((n, i) => (i === a ? d : n)) })),
      { axis: { type: 'int', value: a } },
      label ?? 'Split',
    );
  }

  // ---- contractions and reductions ---------------------------------------------------------------------------

  /** numpy matmul for ranks ≥ 2, batch dims broadcast. */
  matmul(a: Value, b: Value, label?: string): Value {
    if (a.dtype !== b.dtype) throw new GraphError(`MatMul: dtypes ${a.dtype} and ${b.dtype} differ`);
    if (a.shape.length < 2 || b.shape.length < 2) throw new GraphError('MatMul: rank ≥ 2 operands only');
    const [m, k] = a.shape.slice(-2) as [number, number];
    const [k2, n] = b.shape.slice(-2) as [number, number];
    if (k !== k2)
      throw new GraphError(`MatMul: ${fmtShape(a.shape)} @ ${fmtShape(b.shape)}: inner dims differ`);
    const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
    return this.node1('MatMul', [a, b], a.dtype, [...batch, m, n], {}, label ?? 'MatMul');
  }

  /**
   * alpha · op(a) @ op(b) (+ c), op = transpose where asked: ORT's Gemm reads the operand transposed, so x @ Wᵀ
   * (a PyTorch Linear) and the weight gradient dYᵀ @ X need no Transpose node, and `c` (a residual, a bias)
   * is added in the same kernel. A plain product without transposes, scale or c is a MatMul.
   */
  gemm(
    a: Value,
    b: Value,
    t: { transA?: boolean; transB?: boolean; alpha?: number; c?: Value },
    label?: string,
  ): Value {
    const alpha = t.alpha ?? 1;
    if (!t.transA && !t.transB && alpha === 1 && !t.c) return this.matmul(a, b, label);
    if (a.dtype !== b.dtype) throw new GraphError(`Gemm: dtypes ${a.dtype} and ${b.dtype} differ`);
    if (a.shape.length !== 2 || b.shape.length !== 2) throw new GraphError('Gemm: matrices only');
    const [m, k] = (t.transA ? [a.shape[1], a.shape[0]] : a.shape) as [number, number];
    const [k2, n] = (t.transB ? [b.shape[1], b.shape[0]] : b.shape) as [number, number];
    if (k !== k2)
      throw new GraphError(`Gemm: ${fmtShape(a.shape)} · ${fmtShape(b.shape)}: inner dims differ`);
    if (t.c && (t.c.dtype !== a.dtype || !shapeEq(broadcastShapes(t.c.shape, [m, n]), [m, n])))
      throw new GraphError(`Gemm: c ${fmtShape(t.c.shape)} does not broadcast to [${m}, ${n}]`);
    return this.node1(
      'Gemm',
      t.c ? [a, b, t.c] : [a, b],
      a.dtype,
      [m, n],
      {
        transA: { type: 'int', value: t.transA ? 1 : 0 },
        transB: { type: 'int', value: t.transB ? 1 : 0 },
        alpha: { type: 'float', value: alpha },
      },
      label ?? 'Gemm',
    );
  }

  // ---- ORT contrib ops (com.microsoft): float32 only on the CPU EP, so float64 graphs build from primitives ---

  private contrib(
    op: string,
    inputs: Value[],
    shape: Shape,
    attrs: Record<string, Attr>,
    label?: string,
  ): Value {
    const x = inputs[0];
    if (!x || x.dtype !== 'float32') throw new GraphError(`${op}: ORT's CPU EP runs it in float32 only`);
    const [y] = this.node(op, inputs, [{ dtype: x.dtype, shape }], attrs, label ?? op, false, CONTRIB_DOMAIN);
    if (!y) throw new GraphError('unreachable');
    return y;
  }

  /** RMSNorm over the last axis, x / √(mean(x²) + eps) · w, in one kernel (SimplifiedLayerNormalization). */
  simplifiedLayerNorm(x: Value, w: Value, eps: number, label?: string): Value {
    const d = x.shape[x.shape.length - 1];
    if (x.dtype !== w.dtype || w.shape.length !== 1 || w.shape[0] !== d)
      throw new GraphError(
        `SimplifiedLayerNormalization: weight ${fmtShape(w.shape)} for ${fmtShape(x.shape)}`,
      );
    if (x.dtype !== 'float32') throw new GraphError('SimplifiedLayerNormalization: float32 only');
    // ONNX-domain op (ORT registers it there), so no contrib domain; its second output is left out: the WebGPU
    // EP writes the mean, not 1/rms, to it (ORT 1.30), so the gradient rule recomputes what it needs.
    return this.node1(
      'SimplifiedLayerNormalization',
      [x, w],
      x.dtype,
      x.shape,
      { axis: { type: 'int', value: -1 }, epsilon: { type: 'float', value: eps } },
      label ?? 'SimplifiedLayerNormalization',
    );
  }

  /** x · sigmoid(x) (SiLU) in one kernel: QuickGelu with alpha 1. */
  silu(x: Value, label?: string): Value {
    return this.contrib('QuickGelu', [x], x.shape, { alpha: { type: 'float', value: 1 } }, label ?? 'silu');
  }

  /**
   * Rotary embedding (rotate_half convention) of x [B, heads, T, headDim] at positions `positions` (int64
   * constant [B or 1, T]) from cos/sin caches [maxPos, headDim / 2].
   */
  rotaryEmbedding(x: Value, positions: Value, cos: Value, sin: Value, label?: string): Value {
    if (x.shape.length !== 4) throw new GraphError('RotaryEmbedding: x must be [B, heads, T, headDim]');
    if (positions.dtype !== 'int64' || !positions.data)
      throw new GraphError('RotaryEmbedding: positions must be an int64 constant');
    return this.contrib(
      'RotaryEmbedding',
      [x, positions, cos, sin],
      x.shape,
      { interleaved: { type: 'int', value: 0 }, num_heads: { type: 'int', value: x.shape[1] ?? 0 } },
      label ?? 'rotary',
    );
  }

  private reduce(
    op: 'ReduceSum' | 'ReduceMean' | 'ReduceMax' | 'ReduceSumSquare',
    x: Value,
    axes: readonly number[],
    keepdims: boolean,
    label?: string,
    stop = false,
  ): Value {
    const ax = [...new Set(axes.map((a) => normAxis(a, x.shape.length)))].sort((p, q) => p - q);
    if (ax.length === 0) return x;
    const shape: number[] = [];
    x.shape.forEach((d, i) => {
      if (!ax.includes(i)) shape.push(d);
      else if (keepdims) shape.push(1);
    });
    // Reducing only size-1 axes moves no data: it is a reshape.
    if (ax.every((a) => x.shape[a] === 1)) return this.reshape(x, shape, label);
    return this.node1(
      op,
      [x, this.int64s(ax, 'axes')],
      x.dtype,
      shape,
      { keepdims: { type: 'int', value: keepdims ? 1 : 0 } },
      label ?? op,
      stop,
    );
  }

  reduceSum(x: Value, axes: readonly number[], keepdims: boolean, label?: string): Value {
    return this.reduce('ReduceSum', x, axes, keepdims, label);
  }
  /** Σ x² over `axes`. No gradient rule: gradient rules use it, nothing differentiates through it. */
  reduceSumSquare(x: Value, axes: readonly number[], keepdims: boolean, label?: string): Value {
    return this.reduce('ReduceSumSquare', x, axes, keepdims, label);
  }
  reduceMean(x: Value, axes: readonly number[], keepdims: boolean, label?: string): Value {
    return this.reduce('ReduceMean', x, axes, keepdims, label);
  }
  /** Max has no gradient rule here: its only use (stabilising log-sum-exp) needs none, so it is a constant to autodiff. */
  reduceMaxNoGrad(x: Value, axes: readonly number[], keepdims: boolean, label?: string): Value {
    return this.reduce('ReduceMax', x, axes, keepdims, label, true);
  }

  softmax(x: Value, axis = -1, label?: string): Value {
    const a = normAxis(axis, x.shape.length);
    return this.node1(
      'Softmax',
      [x],
      x.dtype,
      x.shape,
      { axis: { type: 'int', value: a } },
      label ?? 'Softmax',
    );
  }

  /** out[i][j] = data[i][indices[i][j]] along `axis` (int32 indices; rank-2 here, as the loss uses it). */
  gatherElements(data: Value, indices: Value, axis: number, label?: string): Value {
    if (indices.dtype !== 'int32') throw new GraphError('gatherElements: int32 indices only');
    if (indices.shape.length !== data.shape.length)
      throw new GraphError('gatherElements: indices must have the rank of data');
    return this.node1(
      'GatherElements',
      [data, indices],
      data.dtype,
      indices.shape,
      { axis: { type: 'int', value: normAxis(axis, data.shape.length) } },
      label ?? 'GatherElements',
    );
  }

  /**
   * A copy of `data` with data[i][indices[i][j]] = updates[i][j] along `axis` (no reduction: each index must
   * be written once, so the result does not depend on the order a GPU writes in).
   */
  scatterElements(data: Value, indices: Value, updates: Value, axis: number, label?: string): Value {
    if (indices.dtype !== 'int32') throw new GraphError('scatterElements: int32 indices only');
    if (!shapeEq(indices.shape, updates.shape) || indices.shape.length !== data.shape.length)
      throw new GraphError('scatterElements: indices and updates must match, with the rank of data');
    if (updates.dtype !== data.dtype) throw new GraphError('scatterElements: updates dtype differs');
    return this.node1(
      'ScatterElements',
      [data, indices, updates],
      data.dtype,
      data.shape,
      { axis: { type: 'int', value: normAxis(axis, data.shape.length) } },
      label ?? 'ScatterElements',
    );
  }

  /** Rows of `data` (axis 0) picked by int32 `indices`: the embedding lookup. */
  gather(data: Value, indices: Value, label?: string): Value {
    if (indices.dtype !== 'int32') throw new GraphError('gather: int32 indices only');
    return this.node1(
      'Gather',
      [data, indices],
      data.dtype,
      [...indices.shape, ...data.shape.slice(1)],
      { axis: { type: 'int', value: 0 } },
      label ?? 'Gather',
    );
  }
}
