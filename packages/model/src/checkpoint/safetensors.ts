// safetensors: the Hugging Face tensor container, encoded and decoded on plain Uint8Arrays.
//
//   [8 bytes: header length N, u64 little-endian][N bytes: JSON header][data bytes]
//
// The header maps tensor name → {dtype, shape, data_offsets: [begin, end]} (offsets relative to the
// start of the data section) plus an optional "__metadata__" string→string map. The reference
// implementation pads the header with spaces so the data section starts 8-byte aligned, and refuses
// files whose tensors overlap, leave holes, or do not cover the data section exactly; we do the same so
// a file we accept is one `safetensors.safe_open` accepts too.
import { CodedError } from './errors.ts';
import { DTYPE_BYTES, bf16ToF32, f16ToF32, f32ToBf16, isFloatDType, type FloatDType } from './dtype.ts';

export type SafetensorsErrorCode =
  'truncated' | 'header-json' | 'header-schema' | 'offsets' | 'unsupported-dtype' | 'size-mismatch';

/** A safetensors file that cannot be read; `code` says which rule it broke. */
export class SafetensorsError extends CodedError<SafetensorsErrorCode> {
  constructor(code: SafetensorsErrorCode, message: string) {
    super('SafetensorsError', code, message);
  }
}

/** Byte sizes of every dtype the format defines; we can skip over any of them but only convert floats. */
const ALL_DTYPE_BYTES: Record<string, number> = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  I64: 8,
  U64: 8,
  F64: 8,
};

/** The reference implementation's cap; it stops a hostile length from allocating gigabytes for JSON. */
const MAX_HEADER_BYTES = 100_000_000;

export interface RawTensor {
  dtype: string;
  shape: number[];
  /** A view into the file's bytes (no copy). */
  bytes: Uint8Array;
}

export interface DecodedSafetensors {
  metadata: Record<string, string>;
  /** Tensors in file order (ascending data offset). */
  tensors: Map<string, RawTensor>;
}

export interface TensorToEncode {
  shape: number[];
  data: Float32Array;
  /** Storage type in the file; float32 data is rounded to nearest-even for BF16. Default F32. */
  dtype?: 'F32' | 'BF16';
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function assertLittleEndianHost(): void {
  // Typed-array views use the host byte order; every platform we run on (x86, ARM, WebGPU hosts) is
  // little-endian, so fail loudly rather than silently byte-swap on an exotic one.
  if (!LITTLE_ENDIAN) throw new Error('safetensors: big-endian hosts are not supported');
}

function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * Encodes tensors into one safetensors file. Tensors are laid out like the reference writer does
 * (larger element size first, then by name), so the same tensors always give the same bytes.
 */
export function encodeSafetensors(
  tensors: Map<string, TensorToEncode> | Record<string, TensorToEncode>,
  metadata?: Record<string, string>,
): Uint8Array {
  assertLittleEndianHost();
  const entries = tensors instanceof Map ? [...tensors.entries()] : Object.entries(tensors);
  const payloads = entries.map(([name, t]) => {
    const dtype = t.dtype ?? 'F32';
    if (name === '__metadata__')
      throw new SafetensorsError('header-schema', 'a tensor may not be named __metadata__');
    if (!t.shape.every((d) => Number.isInteger(d) && d >= 0))
      throw new SafetensorsError(
        'header-schema',
        `${name}: shape [${t.shape.join(', ')}] is not a list of sizes`,
      );
    if (numel(t.shape) !== t.data.length)
      throw new SafetensorsError(
        'size-mismatch',
        `${name}: shape [${t.shape.join(', ')}] needs ${numel(t.shape)} values, got ${t.data.length}`,
      );
    const bytes =
      dtype === 'BF16'
        ? new Uint8Array(f32ToBf16(t.data).buffer)
        : new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    return { name, dtype, shape: t.shape, bytes };
  });
  payloads.sort(
    (a, b) => DTYPE_BYTES[b.dtype] - DTYPE_BYTES[a.dtype] || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );

  // No prototype: a tensor named "__proto__" must become a key of the header, not its prototype.
  const header = Object.create(null) as Record<string, unknown>;
  if (metadata && Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const p of payloads) {
    header[p.name] = { dtype: p.dtype, shape: p.shape, data_offsets: [offset, offset + p.bytes.length] };
    offset += p.bytes.length;
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.length / 8) * 8;
  if (padded !== json.length) {
    const withSpaces = new Uint8Array(padded).fill(0x20);
    withSpaces.set(json);
    json = withSpaces;
  }

  const out = new Uint8Array(8 + json.length + offset);
  const view = new DataView(out.buffer);
  view.setUint32(0, json.length, true);
  view.setUint32(4, 0, true);
  out.set(json, 8);
  let at = 8 + json.length;
  for (const p of payloads) {
    out.set(p.bytes, at);
    at += p.bytes.length;
  }
  return out;
}

function isSizeList(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((d) => Number.isSafeInteger(d) && (d as number) >= 0);
}

interface HeaderEntry {
  name: string;
  dtype: string;
  shape: number[];
  begin: number;
  end: number;
}

/** The JSON header as an object, and the data section after it. */
function readHeader(file: Uint8Array): { header: object; data: Uint8Array } {
  if (file.length < 8)
    throw new SafetensorsError(
      'truncated',
      `file is ${file.length} bytes; the 8-byte header length is missing`,
    );
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const lo = view.getUint32(0, true);
  const hi = view.getUint32(4, true);
  const headerLen = hi * 2 ** 32 + lo;
  if (headerLen > MAX_HEADER_BYTES)
    throw new SafetensorsError(
      'header-schema',
      `header length ${headerLen} exceeds ${MAX_HEADER_BYTES} bytes`,
    );
  if (8 + headerLen > file.length)
    throw new SafetensorsError(
      'truncated',
      `header claims ${headerLen} bytes but the file has only ${file.length - 8} after the length field`,
    );

  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(file.subarray(8, 8 + headerLen)));
  } catch (err) {
    throw new SafetensorsError('header-json', `header is not valid UTF-8 JSON: ${(err as Error).message}`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header))
    throw new SafetensorsError('header-schema', 'header must be a JSON object');
  return { header, data: file.subarray(8 + headerLen) };
}

function readMetadata(value: unknown): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new SafetensorsError('header-schema', '__metadata__ must be an object of strings');
  for (const [k, v] of Object.entries(value))
    if (typeof v !== 'string')
      throw new SafetensorsError('header-schema', `__metadata__.${k} must be a string, got ${typeof v}`);
  return value as Record<string, string>;
}

/** One tensor's header entry, its byte span checked against its dtype and shape. */
function readEntry(name: string, value: unknown): HeaderEntry {
  const t = value as { dtype?: unknown; shape?: unknown; data_offsets?: unknown } | null;
  if (typeof t !== 'object' || t === null)
    throw new SafetensorsError('header-schema', `${name}: entry must be an object`);
  if (typeof t.dtype !== 'string') throw new SafetensorsError('header-schema', `${name}: dtype missing`);
  const size = ALL_DTYPE_BYTES[t.dtype];
  if (size === undefined)
    throw new SafetensorsError('unsupported-dtype', `${name}: unknown dtype ${t.dtype}`);
  if (!isSizeList(t.shape))
    throw new SafetensorsError('header-schema', `${name}: shape must be a list of non-negative integers`);
  if (!isSizeList(t.data_offsets) || t.data_offsets.length !== 2)
    throw new SafetensorsError('header-schema', `${name}: data_offsets must be [begin, end]`);
  const [begin, end] = t.data_offsets as [number, number];
  if (end < begin)
    throw new SafetensorsError('offsets', `${name}: data_offsets [${begin}, ${end}] end before begin`);
  if (end - begin !== numel(t.shape) * size)
    throw new SafetensorsError(
      'size-mismatch',
      `${name}: ${t.dtype}[${t.shape.join(', ')}] needs ${numel(t.shape) * size} bytes, data_offsets span ${end - begin}`,
    );
  return { name, dtype: t.dtype, shape: t.shape, begin, end };
}

/** Sorts the entries by offset and refuses overlaps, holes and bytes no tensor covers. */
function checkCoverage(entries: HeaderEntry[], dataBytes: number): void {
  entries.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let expected = 0;
  for (const e of entries) {
    if (e.begin !== expected)
      throw new SafetensorsError(
        'offsets',
        `${e.name}: data starts at ${e.begin} but the previous tensor ends at ${expected} (overlap or hole)`,
      );
    expected = e.end;
  }
  if (expected > dataBytes)
    throw new SafetensorsError(
      'truncated',
      `tensor data needs ${expected} bytes after the header, the file has ${dataBytes}`,
    );
  if (expected < dataBytes)
    throw new SafetensorsError(
      'offsets',
      `${dataBytes - expected} trailing bytes after the last tensor are not described by the header`,
    );
}

/** Parses and validates a safetensors file without copying tensor bytes. */
export function decodeSafetensors(input: Uint8Array): DecodedSafetensors {
  // A Node Buffer is a Uint8Array whose slice() does not copy; view it as a plain Uint8Array so every
  // subarray/slice below has standard semantics.
  const file = new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  const { header, data } = readHeader(file);
  let metadata: Record<string, string> = {};
  const entries: HeaderEntry[] = [];
  for (const [name, value] of Object.entries(header)) {
    if (name === '__metadata__') metadata = readMetadata(value);
    else entries.push(readEntry(name, value));
  }
  checkCoverage(entries, data.length);
  const tensors = new Map<string, RawTensor>();
  for (const e of entries)
    tensors.set(e.name, { dtype: e.dtype, shape: e.shape, bytes: data.subarray(e.begin, e.end) });
  return { metadata, tensors };
}

/** Widens a floating-point tensor to float32 (F64 rounds to nearest), always returning a fresh copy. */
export function tensorToFloat32(name: string, t: RawTensor): Float32Array {
  assertLittleEndianHost();
  if (!isFloatDType(t.dtype))
    throw new SafetensorsError('unsupported-dtype', `${name}: dtype ${t.dtype} is not a floating-point type`);
  const dtype: FloatDType = t.dtype;
  // Copy into a fresh, aligned buffer: tensor offsets inside a file need not be aligned to the element size.
  // (Uint8Array.prototype.slice explicitly: on a Node Buffer, .slice() would return a view, not a copy.)
  const aligned = Uint8Array.prototype.slice.call(t.bytes).buffer;
  switch (dtype) {
    case 'F32':
      return new Float32Array(aligned);
    case 'F64':
      return Float32Array.from(new Float64Array(aligned));
    case 'BF16':
      return bf16ToF32(new Uint16Array(aligned));
    case 'F16':
      return f16ToF32(new Uint16Array(aligned));
  }
}
