// Small ONNX models written by hand (with onnx-proto) for the browser harness: one that exercises GPU-buffer
// inputs/outputs with a known analytic result, and one that cannot run on the WebGPU EP. They are independent of
// packages/model's graph builder on purpose, so a harness failure is never a builder bug in disguise.
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;

export type ElemDtype = 'float32' | 'float64';

const ELEM: Record<ElemDtype, number> = {
  float32: onnx.TensorProto.DataType.FLOAT,
  float64: onnx.TensorProto.DataType.DOUBLE,
};

function valueInfo(name: string, elemType: number, dims: readonly number[]): onnxProto.onnx.IValueInfoProto {
  return {
    name,
    type: { tensorType: { elemType, shape: { dim: dims.map((d) => ({ dimValue: d })) } } },
  };
}

function encode(graph: onnxProto.onnx.IGraphProto): Uint8Array {
  return onnx.ModelProto.encode({
    irVersion: 8,
    producerName: 'meshtrain-test',
    // Opset 18: ReduceSum takes its axes as an input (absent = all axes), as in the generated train step.
    opsetImport: [{ domain: '', version: 18 }],
    graph,
  }).finish();
}

/**
 * "Train step" of a linear model with loss = sum(x · weight): outputs `loss` and `grad.weight` = xᵀ · 1, named
 * like the real train step's outputs. For x [rows, inner] and weight [inner, cols], grad.weight[i][j] = Σ_r x[r][i].
 */
export function linearSumModel(dtype: ElemDtype, rows: number, inner: number, cols: number): Uint8Array {
  const t = ELEM[dtype];
  const ones = { name: 'ones', dims: [rows, cols], dataType: t } as onnxProto.onnx.ITensorProto;
  if (dtype === 'float32') ones.floatData = new Array<number>(rows * cols).fill(1);
  else ones.doubleData = new Array<number>(rows * cols).fill(1);
  return encode({
    name: 'linear_sum',
    input: [valueInfo('weight', t, [inner, cols]), valueInfo('x', t, [rows, inner])],
    output: [valueInfo('loss', t, []), valueInfo('grad.weight', t, [inner, cols])],
    initializer: [ones],
    node: [
      { name: 'forward/matmul', opType: 'MatMul', input: ['x', 'weight'], output: ['y'] },
      {
        name: 'forward/loss',
        opType: 'ReduceSum',
        input: ['y'],
        output: ['loss'],
        attribute: [{ name: 'keepdims', type: onnx.AttributeProto.AttributeType.INT, i: 0 }],
      },
      {
        name: 'backward/x_t',
        opType: 'Transpose',
        input: ['x'],
        output: ['x_t'],
        attribute: [{ name: 'perm', type: onnx.AttributeProto.AttributeType.INTS, ints: [1, 0] }],
      },
      { name: 'backward/grad_weight', opType: 'MatMul', input: ['x_t', 'ones'], output: ['grad.weight'] },
    ],
  });
}

/**
 * y = Sign(x): Sign has no WebGPU kernel in ORT 1.30 (docs/architecture.md "Runtime notes"), so it can only
 * run on the CPU EP.
 */
export function cpuOnlyModel(): Uint8Array {
  const t = ELEM.float32;
  return encode({
    name: 'cpu_only_sign',
    input: [valueInfo('x', t, [4])],
    output: [valueInfo('y', t, [4])],
    node: [{ name: 'sign', opType: 'Sign', input: ['x'], output: ['y'] }],
  });
}
