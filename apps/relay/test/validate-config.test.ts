// Runs the real bin, as a user would, on the fixtures and on broken configs written to a temp dir.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const bin = join(root, 'apps/relay/bin/meshtrain-relay.mjs');
const fixtures = join(root, 'packages/core/test/fixtures');
const BOOK = join(fixtures, 'psyche-book-example.toml');
const DEFAULT = join(fixtures, 'meshtrain-default.toml');
const defaultText = readFileSync(DEFAULT, 'utf8');

const dir = mkdtempSync(join(tmpdir(), 'meshtrain-validate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `node` from the inherited PATH, as the brief's environment sets it up for the bin. */
function relay(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'node',
      [bin, ...args],
      { cwd: root, encoding: 'utf8', env: process.env },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

let n = 0;
function broken(text: string): string {
  const file = join(dir, `broken-${n++}.toml`);
  writeFileSync(file, text);
  return file;
}

function edit(from: string, to: string): string {
  expect(defaultText).toContain(from);
  return defaultText.replace(from, to);
}

// Each run starts a Node process (~0.5 s), so the cases run concurrently.
describe.concurrent('meshtrain-relay validate-config', () => {
  it("accepts Psyche's book example, noting rounds_per_epoch and what is unsupported", async () => {
    const r = await relay('validate-config', BOOK);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^ok: run .* 25000 steps, gbs 8→8, DisTrO chunk 64 top-8 1-bit, Cosine lr 4e-4$/,
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^note: config\.rounds_per_epoch: converted to epoch_time = 20 × .* = 620 s/),
    );
    for (const path of ['model.LLM.checkpoint.Hub', 'model.LLM.data_location.Http'])
      expect(lines.some((l) => l.startsWith(`note: ${path}: `))).toBe(true);
  });

  it('accepts the embedded default with exactly one summary line', async () => {
    const r = await relay('validate-config', DEFAULT);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      'ok: run default preset tiny, 60 rounds × 5 steps, gbs 64→64, SparseLoCo H=5 chunk 64 top-32 1-bit raw, Cosine lr 3e-3\n',
    );
  });

  it('--json prints the issues of an invalid config', async () => {
    const file = broken(edit('warmup_time = 30', 'warmup_time = 600'));
    const r = await relay('validate-config', file, '--json');
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout) as { ok: boolean; issues: { path: string; message: string }[] };
    expect(out).toEqual({
      ok: false,
      file,
      issues: [{ path: 'config.warmup_time', message: 'must be < config.epoch_time (600 >= 600)' }],
    });
  });

  it('lists a type error and a range error of one file in one run, in both forms', async () => {
    const file = broken(
      edit('max_round_train_time = 60', 'max_round_train_time = "thirty"').replace(
        '\nmin_clients = 1\n',
        '\nmin_clients = 0\n',
      ),
    );
    const [json, human] = await Promise.all([
      relay('validate-config', file, '--json'),
      relay('validate-config', file),
    ]);
    const issues = [
      { path: 'config.max_round_train_time', message: 'expected a number, got string "thirty"' },
      { path: 'config.min_clients', message: 'must be > 0' },
    ];
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({ ok: false, file, issues });
    expect(human.code).toBe(1);
    expect(human.stderr).toBe(
      [
        `${file}: invalid run config (2 errors)`,
        ...issues.map((i) => `error: ${i.path}: ${i.message}`),
        '',
      ].join('\n'),
    );
  });

  it('--json prints the parsed config', async () => {
    const r = await relay('validate-config', '--json', DEFAULT);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { ok: boolean; config: { config: { epoch_time: number } } };
    expect(out.ok).toBe(true);
    expect(out.config.config.epoch_time).toBe(600);
  });

  const rejected: [what: string, text: () => string, paths: string[]][] = [
    ['bad TOML syntax', () => edit('total_steps = 300\n', 'total_steps = [300\n'), ['<toml>']],
    [
      'warmup_time >= epoch_time',
      () => edit('warmup_time = 30', 'warmup_time = 600'),
      ['config.warmup_time'],
    ],
    [
      'an unknown key (typo)',
      () => edit('cooldown_time = 5', 'cooldwon_time = 5'),
      ['config.cooldwon_time', 'config.cooldown_time'],
    ],
    [
      'witness_nodes > min_clients',
      () => edit('witness_nodes = 0', 'witness_nodes = 3'),
      ['config.witness_nodes'],
    ],
    ['a missing required key', () => edit('max_seq_len = 128\n', ''), ['model.LLM.max_seq_len']],
    [
      'a missing variant field',
      () => edit('final_lr = 3.0e-4\n', ''),
      ['model.LLM.lr_schedule.Cosine.final_lr'],
    ],
  ];
  for (const [what, text, paths] of rejected)
    it(`rejects ${what}, naming ${paths.join(', ')}`, async () => {
      const file = broken(text());
      const r = await relay('validate-config', file);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      const errors = r.stderr.split('\n').filter((l) => l.startsWith('error: '));
      expect(errors.map((l) => l.split(': ')[1]).sort()).toEqual([...paths].sort());
    });

  it('exits 2 on usage errors and unreadable files, saying why', async () => {
    const [missing, isDir, noFile, twoFiles, badFlag, unknown, bare, help] = await Promise.all([
      relay('validate-config', join(dir, 'nope.toml')),
      relay('validate-config', dir),
      relay('validate-config'),
      relay('validate-config', DEFAULT, BOOK),
      relay('validate-config', '--jsn', DEFAULT),
      relay('no-such-command'),
      relay(),
      relay('--help'),
    ]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`cannot read ${join(dir, 'nope.toml')}: no such file`);
    expect(isDir.code).toBe(2);
    expect(isDir.stderr).toContain('is a directory');
    expect(noFile.code).toBe(2);
    expect(noFile.stderr).toContain('missing FILE');
    expect(twoFiles.code).toBe(2);
    expect(twoFiles.stderr).toContain('expected one FILE, got 2');
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toContain("'--jsn'");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'no-such-command'");
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('usage: meshtrain-relay <command>');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('validate-config');
  });
});
