// The graph IR: values with static shapes, nodes that produce them, constants that carry their data.
// Everything is known at build time (no symbolic dims): the WebGPU EP places shape-computing subgraphs on the
// CPU, so the generator must never emit them (docs/architecture.md "Runtime notes").

export type DType = 'float32' | 'float64' | 'int32' | 'int64' | 'bool';
export type FloatDType = 'float32' | 'float64';
export type Shape = readonly number[];

export function isFloat(d: DType): d is FloatDType {
  return d === 'float32' || d === 'float64';
}

export function sizeOf(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Attribute values as the ONNX emitter needs them: the tag says which AttributeProto field carries it. */
export type Attr =
  | { type: 'int'; value: number }
  | { type: 'ints'; value: number[] }
  | { type: 'float'; value: number }
  | { type: 'string'; value: string };

export interface Value {
  readonly id: number;
  /** Unique ONNX value name. Graph outputs get renamed to their public name when declared. */
  name: string;
  readonly dtype: DType;
  readonly shape: Shape;
  /** The node that computes it; null for graph inputs and constants. */
  readonly producer: Node | null;
  /**
   * Constant contents (row-major), present only for constants. Floats are kept as float64 numbers already
   * rounded to the value's dtype (so folding in JS sees what ORT would see); integers as exact numbers.
   */
  readonly data: Float64Array | null;
  readonly isInput: boolean;
}

export interface Node {
  readonly id: number;
  /** Readable, unique: `<scope>/<label>`, e.g. `layers.0.attn/scores`, `grad/layers.0.attn/scores/dA`. */
  readonly name: string;
  readonly op: string;
  /** Operator set domain: '' for ONNX, 'com.microsoft' for ORT's contrib ops. */
  readonly domain: string;
  readonly inputs: readonly Value[];
  readonly outputs: Value[];
  readonly attrs: Readonly<Record<string, Attr>>;
  /** Autodiff treats the outputs as constants (e.g. the max subtracted inside a log-sum-exp). */
  readonly stopGradient: boolean;
}

export function shapeEq(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

export function fmtShape(s: Shape): string {
  return `[${s.join(', ')}]`;
}
