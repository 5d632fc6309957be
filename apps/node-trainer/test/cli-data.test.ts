// End-to-end: the real CLI (bin/node-trainer.mjs) in a child process, on temp directories.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ByteTokenizer, PRESETS, decodeTokens, heldOutDocuments, parseManifest } from '@meshtrain/model';
import { readCheckpoint } from '../src/fsio/checkpoint.ts';
import { loadDataset } from '@meshtrain/model/node';

const bin = fileURLToPath(new URL('../bin/node-trainer.mjs', import.meta.url));

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'meshtrain-cli-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Ten small documents with distinct, recognisable text (UTF-8 beyond ASCII included). */
async function writeCorpus(dir: string): Promise<Map<string, string>> {
  const docs = new Map<string, string>();
  await mkdir(join(dir, 'sub'), { recursive: true });
  await mkdir(join(dir, '.hidden'), { recursive: true });
  await writeFile(join(dir, '.hidden', 'skip.txt'), 'never read');
  for (let i = 0; i < 10; i++) {
    const id = i % 2 ? `sub/doc${i}.txt` : `doc${i}.txt`;
    const text = `Document ${i}: ${'naïve café — '.repeat(20 + i)}end ${i}.`;
    docs.set(id, text);
    await writeFile(join(dir, id), text);
  }
  return docs;
}

describe('node-trainer prepare-data', () => {
  it('tokenizes a directory into shards + manifest that decode back to the documents', async () => {
    const input = join(root, 'corpus');
    const out = join(root, 'prepared');
    const docs = await writeCorpus(input);
    const r = await cli([
      'prepare-data',
      '--input',
      input,
      '--out',
      out,
      '--val-fraction',
      '0.2',
      '--shard-tokens',
      '1000',
    ]);
    expect(r.stderr).toMatch(/prepare-data: 100%/); // plain progress lines: stderr is not a TTY here
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/train .* tokens in \d+ shard\(s\) \(8 docs\), val .* \(2 docs\)/);

    const manifest = parseManifest(await readFile(join(out, 'manifest.json'), 'utf8'));
    expect(manifest.tokenizer).toBe('bytes');
    expect(manifest.token_bytes).toBe(2);
    const files = (await readdir(out)).filter((f) => f.endsWith('.bin')).sort();
    expect(files).toEqual(
      [...manifest.splits.train.shards, ...manifest.splits.val.shards].map((s) => s.file).sort(),
    );
    expect(manifest.splits.train.shards.length).toBeGreaterThan(1);

    // Each split's stream is its documents in sorted-path order, each followed by the separator.
    const val = heldOutDocuments([...docs.keys()], 0.2);
    for (const split of ['train', 'val'] as const) {
      const entry = manifest.splits[split];
      const chunks: Uint8Array[] = [];
      for (const s of entry.shards) {
        const bytes = await readFile(join(out, s.file));
        expect(createHash('sha256').update(bytes).digest('hex')).toBe(s.sha256);
        expect(bytes.length).toBe(s.tokens * 2);
        expect(s.tokens).toBeLessThanOrEqual(1000);
        chunks.push(bytes);
      }
      const ids = decodeTokens(Buffer.concat(chunks), 2);
      const ids2 = [...docs.keys()].sort().filter((id) => val.has(id) === (split === 'val'));
      const expected = ids2.map((id) => `${docs.get(id)}\n\n`).join('');
      expect(new ByteTokenizer().decode(ids)).toBe(expected);
      expect(entry.tokens).toBe(ids.length);
    }

    // The loader reads fixed-stride rows of seqLen + 1 tokens from the shards.
    const data = await loadDataset(out, { seqLen: 16 });
    const row = data.train.batch([0]);
    expect(row.length).toBe(17);
    const firstTrain = [...docs.keys()].sort().find((id) => !val.has(id))!;
    expect([...row]).toEqual([...new ByteTokenizer().encode(docs.get(firstTrain)!).subarray(0, 17)]);
  });

  it('fails clearly on missing input or missing --out', async () => {
    const missing = await cli(['prepare-data', '--input', join(root, 'nope'), '--out', join(root, 'x')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/input '.*nope' does not exist/);
    const noOut = await cli(['prepare-data', '--input', root]);
    expect(noOut.code).toBe(2);
    expect(noOut.stderr).toMatch(/--out DIR is required/);
    const bad = await cli(['prepare-data', '--input', root, '--out', join(root, 'y'), '--token-bytes', '3']);
    expect(bad.stderr).toMatch(/--token-bytes: 2 or 4/);
  });

  it('detects a shard that no longer matches its manifest', async () => {
    const input = join(root, 'c2');
    const out = join(root, 'p2');
    await writeCorpus(input);
    expect((await cli(['prepare-data', '--input', input, '--out', out, '--token-bytes', '4'])).code).toBe(0);
    const file = join(out, 'train-00000.bin');
    const bytes = await readFile(file);
    bytes[0] = (bytes[0] as number) ^ 1;
    await writeFile(file, bytes);
    await expect(loadDataset(out, { seqLen: 8 })).rejects.toThrow(/SHA-256 differs/);
  });
});

describe('node-trainer init-model', () => {
  it('writes a deterministic checkpoint: same seed → same bytes, other seed → other bytes', async () => {
    const run = async (seed: string, name: string) => {
      const dir = join(root, name);
      const r = await cli(['init-model', '--preset', 'micro', '--seed', seed, '--out', dir]);
      expect(r.code, r.stderr).toBe(0);
      return readFile(join(dir, 'model.safetensors'));
    };
    const [a, b, c] = await Promise.all([run('5', 'm1'), run('5', 'm2'), run('6', 'm3')]);
    expect(a.equals(b)).toBe(true);
    expect(a.equals(c)).toBe(false);
    const back = await readCheckpoint(join(root, 'm1'));
    expect(back.config).toEqual(PRESETS.micro);
  });

  it('documents itself through the dispatcher and rejects bad flags', async () => {
    const help = await cli(['init-model', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/usage: node-trainer init-model --preset/);
    const top = await cli(['--help']);
    expect(top.stdout).toMatch(
      /init-model .*\n.*prepare-data|prepare-data[\s\S]*init-model|init-model[\s\S]*prepare-data/,
    );
    const bad = await cli(['init-model', '--preset', 'huge', '--out', join(root, 'z')]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/unknown preset 'huge'/);
    const noOut = await cli(['init-model', '--preset', 'micro']);
    expect(noOut.stderr).toMatch(/--out DIR is required/);
  });
});
