// File formats of `node-trainer distro`: tensors in safetensors (model's codec), results in JSON.
import { readFile } from 'node:fs/promises';
import { decodeSafetensors, tensorToFloat32 } from '@meshtrain/model';
import { tensorLayout, type TensorResult } from '@meshtrain/distro';
import { CliError } from '../command.ts';

export interface NamedTensor {
  name: string;
  shape: number[];
  data: Float32Array;
}

/**
 * Every tensor of a safetensors file as float32, in ascending byte-lexicographic name order
 * (docs/protocol.md "Variable order").
 */
export async function readTensors(
  path: string,
  flag: string,
): Promise<{ tensors: NamedTensor[]; metadata: Record<string, string> }> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (err) {
    throw new CliError(`${flag}: cannot read ${path} (${(err as Error).message})`);
  }
  let decoded;
  try {
    decoded = decodeSafetensors(bytes);
  } catch (err) {
    throw new CliError(`${flag}: ${path} is not a safetensors file (${(err as Error).message})`);
  }
  const tensors = [...decoded.tensors.entries()].map(([name, raw]) => ({
    name,
    shape: raw.shape,
    data: tensorToFloat32(name, raw),
  }));
  tensors.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { tensors, metadata: decoded.metadata };
}

export interface ResultTensorJson {
  name: string;
  shape: number[];
  xshape: number[];
  totalk: number;
  indices: number[];
  values: number[];
}

export interface ResultFileJson {
  chunk: number;
  topk: number;
  quantize_1bit: boolean;
  tensors: ResultTensorJson[];
}

export function resultToJson(name: string, shape: number[], r: TensorResult): ResultTensorJson {
  return {
    name,
    shape,
    xshape: [...r.xshape],
    totalk: r.totalk,
    indices: [...r.indices],
    values: [...r.values],
  };
}

const isIntArray = (v: unknown): v is number[] =>
  Array.isArray(v) && v.every((x) => Number.isSafeInteger(x) && x >= 0);

/** Parses and checks a result file: every tensor's layout must be what `chunk` gives its shape. */
export function parseResultFile(
  text: string,
  path: string,
): { chunk: number; quantized: boolean; tensors: Map<string, { shape: number[]; result: TensorResult }> } {
  const bad = (msg: string): never => {
    throw new CliError(`--results: ${path}: ${msg}`);
  };
  let json: Partial<ResultFileJson>;
  try {
    json = JSON.parse(text) as Partial<ResultFileJson>;
  } catch (err) {
    return bad(`not JSON (${(err as Error).message})`);
  }
  const { chunk, quantize_1bit: quantized } = json;
  if (!Number.isSafeInteger(chunk) || (chunk as number) < 1) bad('"chunk" must be a positive integer');
  if (typeof quantized !== 'boolean') bad('"quantize_1bit" must be true or false');
  if (!Array.isArray(json.tensors)) bad('"tensors" must be an array');
  const tensors = new Map<string, { shape: number[]; result: TensorResult }>();
  for (const [i, t] of (json.tensors as ResultTensorJson[]).entries()) {
    const where = `tensors[${i}]${typeof t?.name === 'string' ? ` (${t.name})` : ''}`;
    if (typeof t?.name !== 'string') bad(`${where}: "name" must be a string`);
    if (!isIntArray(t.shape) || !isIntArray(t.xshape) || !isIntArray(t.indices))
      bad(`${where}: shape, xshape and indices must be arrays of non-negative integers`);
    if (!Array.isArray(t.values) || !t.values.every((v) => typeof v === 'number' && Number.isFinite(v)))
      bad(`${where}: values must be finite numbers`);
    let layout;
    try {
      layout = tensorLayout(t.shape, chunk as number);
    } catch (err) {
      return bad(`${where}: ${(err as Error).message}`);
    }
    const k = t.indices.length / layout.blocks;
    if (!Number.isInteger(k) || t.values.length !== t.indices.length)
      bad(`${where}: ${t.indices.length} indices and ${t.values.length} values for ${layout.blocks} chunks`);
    if (tensors.has(t.name)) bad(`${where}: tensor listed twice`);
    tensors.set(t.name, {
      shape: t.shape,
      result: {
        xshape: t.xshape,
        totalk: t.totalk,
        k,
        indices: Uint32Array.from(t.indices),
        values: Float32Array.from(t.values),
        quantized: quantized as boolean,
      },
    });
  }
  return { chunk: chunk as number, quantized: quantized as boolean, tensors };
}
