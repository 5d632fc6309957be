// Unit tests of the web app's pure modules (the browser scenarios are in e2e/scenarios).
import { describe, expect, it } from 'vitest';
import { DEFAULT_RUN_TOML } from '@meshtrain/core';
import { parsePrometheus } from '../src/lib/api.ts';
import type { RoundRow } from '../src/lib/api.ts';
import { lossPoints, reportPoints, throughputPoints } from '../src/lib/chart.ts';
import { formatRate, formatTokensPerSec } from '../src/lib/format.ts';
import { checkRunToml, templateToml } from '../src/lib/config-check.ts';
import { parseRoute } from '../src/lib/routes.ts';
import { chooseMicroBatch } from '../src/worker/device-probe.ts';

describe('routes', () => {
  it('maps paths to pages', () => {
    expect(parseRoute('/')).toEqual({ page: 'volunteer' });
    expect(parseRoute('/admin/')).toEqual({ page: 'admin' });
    expect(parseRoute('/runs/my%20run')).toEqual({ page: 'run', runId: 'my run' });
    expect(parseRoute('/runs/%E0')).toEqual({ page: 'not-found', path: '/runs/%E0' });
    expect(parseRoute('/nope')).toEqual({ page: 'not-found', path: '/nope' });
  });
});

describe('config check', () => {
  it('accepts the default run and lists problems with key paths', () => {
    const ok = checkRunToml(templateToml(DEFAULT_RUN_TOML, 'mine'));
    expect(ok.ok && ok.runId).toBe('mine');
    const bad = checkRunToml(DEFAULT_RUN_TOML.replace('witness_nodes = 0', 'witnes_nodes = 0'));
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.issues.map((i) => i.path)).toContain('config.witnes_nodes');
    const syntax = checkRunToml('[config\n');
    expect(!syntax.ok && syntax.issues[0]?.path).toBe('<toml>');
  });
});

describe('micro-batch choice', () => {
  it("takes the run's micro-batch when the activations fit, fewer rows when they do not", () => {
    expect(chooseMicroBatch({ preset: 'micro', seqLen: 32, microBatchSize: 2 }, 128 << 20).microBatch).toBe(
      2,
    );
    // 125m: 2048 tokens × 32000 vocab × 4 B = 262 MB of logits per sequence.
    const big = chooseMicroBatch({ preset: '125m', seqLen: 2048, microBatchSize: 8 }, 1 << 30);
    expect(big.microBatch).toBe(2);
    expect(big.reason).toMatch(/maxStorageBufferBindingSize/);
    expect(chooseMicroBatch({ preset: '125m', seqLen: 2048, microBatchSize: 8 }, 128 << 20).microBatch).toBe(
      1,
    );
    expect(chooseMicroBatch({ preset: null, seqLen: 32, microBatchSize: 4 }, 1 << 30).microBatch).toBe(1);
  });
});

describe('metrics and charts', () => {
  it('parses Prometheus samples with labels', () => {
    const m = parsePrometheus(
      '# HELP x y\nmeshtrain_bytes_in_total 1234\nmeshtrain_clients{run="a",state="Healthy"} 2\nbad line\n',
    );
    expect(m.get('meshtrain_bytes_in_total')).toEqual([{ labels: {}, value: 1234 }]);
    expect(m.get('meshtrain_clients')).toEqual([{ labels: { run: 'a', state: 'Healthy' }, value: 2 }]);
  });

  it('derives loss and throughput series from round history (round times in seconds)', () => {
    const round = (step: number, loss: number | null, started: number, ended: number | null): RoundRow => ({
      step,
      epoch: 0,
      height: step - 1,
      random_seed: '',
      data_index: 0,
      batch_size: 4,
      training: true,
      clients: 2,
      started_at: started,
      ended_at: ended,
      witnesses: 2,
      quorum: 2,
      quorum_reached: true,
      accepted: null,
      loss,
    });
    const rounds = [round(3, null, 10, null), round(2, 4.5, 8, 10), round(1, 5, 6, 8)];
    expect(lossPoints(rounds)).toEqual([
      [1, 5],
      [2, 4.5],
    ]);
    expect(throughputPoints(rounds, 32)).toEqual([
      [1, 64],
      [2, 64],
    ]);
  });
});

describe('witness reports on the dashboard', () => {
  it('charts the per-step means oldest first, bandwidth in KiB/s', () => {
    const reports = [
      { step: 5, reports: 2, tokens_per_sec: 1500, bandwidth: 4096 },
      { step: 4, reports: 1, tokens_per_sec: 1200, bandwidth: 2048 },
    ];
    expect(reportPoints(reports, 'tokens_per_sec')).toEqual([
      [4, 1200],
      [5, 1500],
    ]);
    expect(reportPoints(reports, 'bandwidth')).toEqual([
      [4, 2],
      [5, 4],
    ]);
  });

  it('formats rates, with a dash for none', () => {
    expect(formatTokensPerSec(12345.6)).toBe('12,346 tok/s');
    expect(formatTokensPerSec(2.25)).toBe('2.3 tok/s');
    expect(formatTokensPerSec(null)).toBe('–');
    expect(formatRate(1536)).toBe('1.5 KiB/s');
    expect(formatRate(undefined)).toBe('–');
  });
});
