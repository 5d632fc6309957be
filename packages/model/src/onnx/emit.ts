// Serialises a built graph to an ONNX ModelProto with protobufjs's low-level Writer. Field numbers are those
// of onnx.proto (ModelProto.graph = 7, GraphProto.node = 1, ...). Only nodes that some output depends on are
// written (dead-code elimination), constants become initializers with raw little-endian data.
import protobuf from 'protobufjs/minimal.js';
import { CONTRIB_DOMAIN, type GraphBuilder, ONNX_DTYPE } from '../graph/builder.ts';
import type { Attr, DType, Node, Value } from '../graph/ir.ts';

/** Opset 18: Reduce* take axes as an input, Split has num_outputs; every op we use is defined at this version. */
export const OPSET = 18;
/** IR version 8 is the one opset 18 was released with; ORT 1.30 reads IR ≤ 11. */
export const IR_VERSION = 8;

type Writer = protobuf.Writer;

const VARINT = 0;
const FIXED32 = 5;
const LEN = 2;

function tag(w: Writer, field: number, wire: number): Writer {
  return w.uint32((field << 3) | wire);
}

function message(w: Writer, field: number, body: (w: Writer) => void): void {
  tag(w, field, LEN).fork();
  body(w);
  w.ldelim();
}

/** Little-endian bytes of constant data in its ONNX element type (every platform ORT runs on is little-endian). */
export function rawBytes(dtype: DType, data: Float64Array): Uint8Array {
  switch (dtype) {
    case 'float32':
      return new Uint8Array(Float32Array.from(data).buffer);
    case 'float64':
      return new Uint8Array(Float64Array.from(data).buffer);
    case 'int32':
      return new Uint8Array(Int32Array.from(data).buffer);
    case 'int64':
      return new Uint8Array(BigInt64Array.from(data, (x) => BigInt(x)).buffer);
    case 'bool':
      return Uint8Array.from(data);
  }
}

function valueInfo(w: Writer, field: number, v: Value): void {
  message(w, field, (w) => {
    tag(w, 1, LEN).string(v.name);
    message(w, 2, (w) =>
      message(w, 1, (w) => {
        tag(w, 1, VARINT).int32(ONNX_DTYPE[v.dtype]);
        message(w, 2, (w) => {
          for (const d of v.shape) message(w, 1, (w) => tag(w, 1, VARINT).int64(d));
        });
      }),
    );
  });
}

function tensor(w: Writer, field: number, v: Value): void {
  if (!v.data) throw new Error(`initializer ${v.name} has no data`);
  const data = v.data;
  message(w, field, (w) => {
    for (const d of v.shape) tag(w, 1, VARINT).int64(d);
    tag(w, 2, VARINT).int32(ONNX_DTYPE[v.dtype]);
    tag(w, 8, LEN).string(v.name);
    tag(w, 9, LEN).bytes(rawBytes(v.dtype, data));
  });
}

function attribute(w: Writer, name: string, a: Attr): void {
  message(w, 5, (w) => {
    tag(w, 1, LEN).string(name);
    switch (a.type) {
      case 'float':
        tag(w, 2, FIXED32).float(a.value);
        tag(w, 20, VARINT).int32(1);
        break;
      case 'int':
        tag(w, 3, VARINT).int64(a.value);
        tag(w, 20, VARINT).int32(2);
        break;
      case 'string':
        tag(w, 4, LEN).bytes(new TextEncoder().encode(a.value));
        tag(w, 20, VARINT).int32(3);
        break;
      case 'ints':
        for (const x of a.value) tag(w, 8, VARINT).int64(x);
        tag(w, 20, VARINT).int32(7);
        break;
    }
  });
}

function nodeProto(w: Writer, n: Node): void {
  message(w, 1, (w) => {
    for (const v of n.inputs) tag(w, 1, LEN).string(v.name);
    for (const v of n.outputs) tag(w, 2, LEN).string(v.name);
    tag(w, 3, LEN).string(n.name);
    tag(w, 4, LEN).string(n.op);
    if (n.domain) tag(w, 7, LEN).string(n.domain);
    for (const [k, a] of Object.entries(n.attrs)) attribute(w, k, a);
  });
}

/** The nodes the outputs depend on, in build (= topological) order. */
export function liveNodes(b: GraphBuilder): Node[] {
  const live = new Set<number>();
  const stack: Value[] = [...b.outputs];
  while (stack.length) {
    const v = stack.pop() as Value;
    const p = v.producer;
    if (!p || live.has(p.id)) continue;
    live.add(p.id);
    stack.push(...p.inputs);
  }
  return b.nodes.filter((n) => live.has(n.id));
}

export function emitOnnx(b: GraphBuilder, opts: { name: string; doc?: string }): Uint8Array {
  const nodes = liveNodes(b);
  const consts = new Map<number, Value>();
  for (const n of nodes) for (const v of n.inputs) if (v.data) consts.set(v.id, v);
  for (const v of b.outputs)
    if (v.data) throw new Error(`output ${v.name} is a constant: wrap it with output()`);

  const w = protobuf.Writer.create();
  tag(w, 1, VARINT).int64(IR_VERSION);
  tag(w, 2, LEN).string('meshtrain');
  tag(w, 3, LEN).string('0.1.0');
  if (opts.doc) tag(w, 6, LEN).string(opts.doc);
  message(w, 7, (w) => {
    for (const n of nodes) nodeProto(w, n);
    tag(w, 2, LEN).string(opts.name);
    for (const c of consts.values()) tensor(w, 5, c);
    for (const v of b.inputs) valueInfo(w, 11, v);
    for (const v of b.outputs) valueInfo(w, 12, v);
  });
  message(w, 8, (w) => {
    tag(w, 1, LEN).string('');
    tag(w, 2, VARINT).int64(OPSET);
  });
  // ORT's contrib operators are at version 1 of their domain.
  if (nodes.some((n) => n.domain === CONTRIB_DOMAIN))
    message(w, 8, (w) => {
      tag(w, 1, LEN).string(CONTRIB_DOMAIN);
      tag(w, 2, VARINT).int64(1);
    });
  return w.finish();
}
