// Makes an ONNX model safe for onnxruntime-web's WebGPU graph capture (ORT 1.30): a graph output produced by
// an aliasing op (Reshape, Identity, Squeeze, Unsqueeze, Flatten) reaches its bound output buffer through a
// buffer copy, and capture records compute dispatches only, so on replay that output keeps the value of the
// capture run (seen: every RMSNorm weight gradient, a ReduceSum then Reshape, stale after the first step).
// Each such output is recomputed by Max(x, x), an elementwise kernel that writes it on every replay and
// returns x exactly. Field numbers are onnx.proto's (ModelProto.graph = 7, GraphProto.node = 1, .output = 12;
// NodeProto.input = 1, .output = 2, .name = 3, .op_type = 4; ValueInfoProto.name = 1).
import protobuf from 'protobufjs/minimal.js';

const ALIASING = new Set(['Reshape', 'Identity', 'Squeeze', 'Unsqueeze', 'Flatten']);
const LEN = 2;

interface Field {
  field: number;
  /** The whole field as encoded (tag and value): re-emitted unchanged unless replaced. */
  raw: Uint8Array;
  /** Length-delimited fields: the value's bytes. */
  body?: Uint8Array;
}

function fields(bytes: Uint8Array): Field[] {
  const r = protobuf.Reader.create(bytes);
  const out: Field[] = [];
  while (r.pos < r.len) {
    const start = r.pos;
    const tag = r.uint32();
    const field = tag >>> 3;
    if ((tag & 7) === LEN) {
      const body = r.bytes();
      out.push({ field, raw: bytes.subarray(start, r.pos), body });
    } else {
      r.skipType(tag & 7);
      out.push({ field, raw: bytes.subarray(start, r.pos) });
    }
  }
  return out;
}

const text = (b: Uint8Array | undefined): string => (b ? new TextDecoder().decode(b) : '');

/** Concatenates encoded fields (protobuf messages are their fields' bytes in sequence). */
function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((a, c) => a + c.length, 0));
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return out;
}

function stringField(field: number, value: string): Uint8Array {
  return protobuf.Writer.create()
    .uint32((field << 3) | LEN)
    .string(value)
    .finish();
}

function messageField(field: number, body: Uint8Array): Uint8Array {
  return protobuf.Writer.create()
    .uint32((field << 3) | LEN)
    .bytes(body)
    .finish();
}

/** The model with every aliased graph output recomputed by an elementwise kernel, and those outputs' names. */
export function captureSafeOutputs(onnx: Uint8Array): { onnx: Uint8Array; patched: string[] } {
  const model = fields(onnx);
  const graphField = model.find((f) => f.field === 7);
  if (!graphField?.body) throw new Error('the ONNX model has no graph');
  const graph = fields(graphField.body);
  const outputs = new Set(
    graph
      .filter((f) => f.field === 12)
      .map((f) => text(fields(f.body as Uint8Array).find((v) => v.field === 1)?.body)),
  );
  const patched: string[] = [];
  const graphChunks: Uint8Array[] = [];
  const extra: Uint8Array[] = [];
  for (const f of graph) {
    if (f.field !== 1) {
      graphChunks.push(f.raw);
      continue;
    }
    const node = fields(f.body as Uint8Array);
    const op = text(node.find((n) => n.field === 4)?.body);
    const out = node.filter((n) => n.field === 2);
    const name = text(out[0]?.body);
    if (!ALIASING.has(op) || out.length !== 1 || !outputs.has(name)) {
      graphChunks.push(f.raw);
      continue;
    }
    const inner = `${name}/before_capture_copy`;
    const renamed = concat(node.map((n) => (n.field === 2 ? stringField(2, inner) : n.raw)));
    graphChunks.push(messageField(1, renamed));
    extra.push(
      messageField(
        1,
        concat([
          stringField(1, inner),
          stringField(1, inner),
          stringField(2, name),
          stringField(3, `${name}/capture_copy`),
          stringField(4, 'Max'),
        ]),
      ),
    );
    patched.push(name);
  }
  if (patched.length === 0) return { onnx, patched };
  const newGraph = concat([...graphChunks, ...extra]);
  const out = concat(model.map((f) => (f.field === 7 ? messageField(7, newGraph) : f.raw)));
  return { onnx: out, patched };
}
