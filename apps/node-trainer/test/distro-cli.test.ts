// `node-trainer distro compress|apply` end to end, checked against float64 references written here: the DCT
// by its cosine formula with a plain top-k, and p − lr·sign(IDCT(mean)) with a dense IDCT.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeSafetensors, encodeSafetensors, tensorToFloat32 } from '@meshtrain/model';
import { afterAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/node-trainer.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'meshtrain-distro-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const backends = process.env.MESHTRAIN_SKIP_WEBGPU === '1' ? ['cpu'] : ['cpu', 'webgpu'];

let seed = 42;
const rand = (): number => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
};
// chunk 8: [24, 40] → 8×8 blocks; [20] → chunks of 5 (largest divisor < 8); [2, 6, 16] → 6×8 blocks.
const SHAPES: Record<string, number[]> = { 'b.weight': [24, 40], 'a.norm': [20], 'c.conv': [2, 6, 16] };
const CHUNK = 8;
function tensors(scale: number): Map<string, { shape: number[]; data: Float32Array }> {
  return new Map(
    Object.entries(SHAPES).map(([name, shape]) => [
      name,
      {
        shape,
        data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => (rand() - 0.5) * scale),
      },
    ]),
  );
}
function save(name: string, t: Map<string, { shape: number[]; data: Float32Array }>): string {
  const path = join(dir, name);
  writeFileSync(path, encodeSafetensors(t));
  return path;
}
function cli(...args: string[]): void {
  const r = spawnSync(process.execPath, [BIN, 'distro', ...args], { encoding: 'utf8' });
  if (r.status !== 0)
    throw new Error(`node-trainer distro ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
}

/**
 * Block geometry the way docs/protocol.md "Chunk choice" and "DCT blocks and xshape" state it, recomputed
 * independently of the package.
 */
function split(s: number, c: number): number {
  let best = 1;
  for (let d = 1; d <= Math.min(s, c); d++) if (s % d === 0) best = d;
  return best;
}
function blocksOf(shape: number[]): {
  n1: number;
  n2: number;
  rows: number;
  cols: number;
  blocks: { r0: number; c0: number }[];
} {
  const cols = shape[shape.length - 1]!;
  const rows = shape.reduce((a, b) => a * b, 1) / cols;
  const n1 = shape.length === 1 ? 1 : split(shape[shape.length - 2]!, CHUNK);
  const n2 = split(cols, CHUNK);
  const blocks = [];
  for (let r0 = 0; r0 < rows; r0 += n1) for (let c0 = 0; c0 < cols; c0 += n2) blocks.push({ r0, c0 });
  return { n1, n2, rows, cols, blocks };
}
const cosine = (N: number, k: number, n: number): number =>
  (k === 0 ? Math.sqrt(1 / N) : Math.sqrt(2 / N)) * Math.cos((Math.PI * (2 * n + 1) * k) / (2 * N));

interface ResultJson {
  chunk: number;
  topk: number;
  quantize_1bit: boolean;
  tensors: {
    name: string;
    shape: number[];
    xshape: number[];
    totalk: number;
    indices: number[];
    values: number[];
  }[];
}

describe('node-trainer distro', () => {
  const delta = tensors(1);
  const deltaPath = save('delta.safetensors', delta);

  it.each(backends)('compress (%s) matches a float64 DCT with a plain top-k', (backend) => {
    const out = join(dir, `result-${backend}.json`);
    cli(
      'compress',
      '--in',
      deltaPath,
      '--chunk',
      String(CHUNK),
      '--topk',
      '3',
      '--backend',
      backend,
      '--out',
      out,
    );
    const json = JSON.parse(readFileSync(out, 'utf8')) as ResultJson;
    expect(json).toMatchObject({ chunk: CHUNK, topk: 3, quantize_1bit: false });
    expect(json.tensors.map((t) => t.name)).toEqual(['a.norm', 'b.weight', 'c.conv']);
    for (const t of json.tensors) {
      const { n1, n2, cols, blocks } = blocksOf(t.shape);
      const x = delta.get(t.name)!.data;
      expect(t.totalk).toBe(n1 * n2);
      expect(t.indices).toHaveLength(blocks.length * 3);
      blocks.forEach(({ r0, c0 }, bi) => {
        const coef: number[] = [];
        for (let b = 0; b < n1; b++)
          for (let d = 0; d < n2; d++) {
            let s = 0;
            for (let h = 0; h < n1; h++)
              for (let w = 0; w < n2; w++)
                s += x[(r0 + h) * cols + c0 + w]! * cosine(n1, b, h) * cosine(n2, d, w);
            coef.push(s);
          }
        const order = coef.map((v, i) => i).sort((a, b) => Math.abs(coef[b]!) - Math.abs(coef[a]!));
        const kth = Math.abs(coef[order[2]!]!);
        for (let j = 0; j < 3; j++) {
          const e = t.indices[bi * 3 + j]!;
          expect(Math.abs(t.values[bi * 3 + j]! - coef[e]!)).toBeLessThanOrEqual(
            1e-5 * Math.max(1, Math.abs(coef[e]!)),
          );
          expect(Math.abs(coef[e]!)).toBeGreaterThanOrEqual(kth - 1e-6);
        }
        expect(new Set(t.indices.slice(bi * 3, bi * 3 + 3)).size).toBe(3);
      });
    }
  });

  it('compress --quantize-1bit writes signs', () => {
    const out = join(dir, 'signs.json');
    cli(
      'compress',
      '--in',
      deltaPath,
      '--chunk',
      String(CHUNK),
      '--topk',
      '2',
      '--quantize-1bit',
      '--out',
      out,
    );
    const json = JSON.parse(readFileSync(out, 'utf8')) as ResultJson;
    expect(json.quantize_1bit).toBe(true);
    for (const t of json.tensors) for (const v of t.values) expect(Math.abs(v)).toBe(1);
  });

  it('apply matches p − lr·sign(IDCT(mean)), bit-identical across backends', () => {
    const params = tensors(0.1);
    const paramsPath = save('params.safetensors', params);
    const results = [1, 2, 3].map((i) => {
      const path = join(dir, `peer${i}.json`);
      cli(
        'compress',
        '--in',
        save(`d${i}.safetensors`, tensors(1)),
        '--chunk',
        String(CHUNK),
        '--topk',
        '4',
        '--out',
        path,
      );
      return path;
    });
    const lr = 0.01;
    const outs = backends.map((backend) => {
      const out = join(dir, `p2-${backend}.safetensors`);
      cli(
        'apply',
        '--params',
        paramsPath,
        '--results',
        results.join(','),
        '--lr',
        String(lr),
        '--backend',
        backend,
        '--out',
        out,
      );
      return readFileSync(out);
    });
    for (const o of outs) expect(Buffer.compare(o, outs[0]!)).toBe(0);
    const got = decodeSafetensors(new Uint8Array(outs[0]!));
    const peers = results.map((p) => JSON.parse(readFileSync(p, 'utf8')) as ResultJson);
    let checked = 0;
    for (const [name, { shape, data }] of params) {
      const after = tensorToFloat32(name, got.tensors.get(name)!);
      const { n1, n2, cols, blocks } = blocksOf(shape);
      blocks.forEach(({ r0, c0 }, bi) => {
        // Scatter mean over the peers that selected each coefficient, then a dense float64 IDCT.
        const sum = new Float64Array(n1 * n2);
        const cnt = new Float64Array(n1 * n2);
        for (const p of peers) {
          const t = p.tensors.find((x) => x.name === name)!;
          for (let j = bi * 4; j < bi * 4 + 4; j++) {
            sum[t.indices[j]!]! += t.values[j]!;
            cnt[t.indices[j]!]! += 1;
          }
        }
        for (let h = 0; h < n1; h++)
          for (let w = 0; w < n2; w++) {
            let v = 0;
            let mag = 0;
            for (let e = 0; e < n1 * n2; e++) {
              if (!cnt[e]) continue;
              const term = (sum[e]! / cnt[e]!) * cosine(n1, Math.floor(e / n2), h) * cosine(n2, e % n2, w);
              v += term;
              mag += Math.abs(term);
            }
            const i = (r0 + h) * cols + c0 + w;
            if (Math.abs(v) <= 1e-3 * mag) continue; // within the fixed point's resolution of 0
            expect(after[i]).toBe(Math.fround(data[i]! - Math.fround(lr) * Math.sign(v)));
            checked++;
          }
      });
    }
    expect(checked).toBeGreaterThan(900);
  });

  it('rejects results whose layout does not match the parameters', () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(
      bad,
      JSON.stringify({
        chunk: 4,
        topk: 1,
        quantize_1bit: false,
        tensors: [
          {
            name: 'a.norm',
            shape: [20],
            xshape: [4, 5],
            totalk: 5,
            indices: [0, 0, 0, 0, 0],
            values: [1, 1, 1, 1, 1],
          },
        ],
      }),
    );
    const r = spawnSync(
      process.execPath,
      [
        BIN,
        'distro',
        'apply',
        '--params',
        join(dir, 'params.safetensors'),
        '--results',
        bad,
        '--lr',
        '0.1',
        '--out',
        join(dir, 'x.safetensors'),
      ],
      { encoding: 'utf8' },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/xshape \[4, 5\] does not match the expected \[5, 4\]/);
  });
});
