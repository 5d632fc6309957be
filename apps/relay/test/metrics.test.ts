import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RUN_TOML,
  coordinatorConfigOf,
  createCoordinator,
  parseRunConfig,
  tick,
  type CoordinatorState,
} from '@meshtrain/core';
import { MetricsRegistry, RelayMetrics, metricsRoutes } from '../src/metrics/index.ts';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
interface Parsed {
  help: Map<string, string>;
  type: Map<string, string>;
  samples: Sample[];
}

/**
 * A strict parser of the Prometheus text format (the subset we emit): HELP/TYPE lines, then samples
 * `name{l="v",…} value`, with the format's escapes undone. Throws on anything it does not understand.
 */
function parseExposition(text: string): Parsed {
  const out: Parsed = { help: new Map(), type: new Map(), samples: [] };
  if (!text.endsWith('\n')) throw new Error('exposition must end with a newline');
  for (const line of text.slice(0, -1).split('\n')) {
    let m = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (m) {
      out.help.set(
        m[1]!,
        m[2]!.replace(/\\(\\|n)/g, (_, e: string) => (e === 'n' ? '\n' : '\\')),
      );
      continue;
    }
    m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge)$/.exec(line);
    if (m) {
      if (out.type.has(m[1]!)) throw new Error(`second TYPE for ${m[1]}`);
      out.type.set(m[1]!, m[2]!);
      continue;
    }
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable line: ${line}`);
    const name = m[1]!;
    if (!out.type.has(name)) throw new Error(`sample ${name} before its TYPE line`);
    const labels: Record<string, string> = {};
    let rest = m[2] ?? '';
    while (rest.length > 0) {
      const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/.exec(rest);
      if (!lm) throw new Error(`bad labels in: ${line}`);
      labels[lm[1]!] = lm[2]!.replace(/\\([\\"n])/g, (_, e: string) => (e === 'n' ? '\n' : e));
      rest = rest.slice(lm[0].length);
    }
    const raw = m[3]!;
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
    if (raw !== 'NaN' && Number.isNaN(value)) throw new Error(`bad value in: ${line}`);
    out.samples.push({ name, labels, value });
  }
  return out;
}

const find = (p: Parsed, name: string, labels: Record<string, string> = {}) =>
  p.samples.find(
    (s) =>
      s.name === name &&
      Object.keys(labels).length === Object.keys(s.labels).length &&
      Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  )?.value;

describe('registry', () => {
  it('escapes label values and help text so they parse back exactly', () => {
    const r = new MetricsRegistry();
    const g = r.gauge('x_gauge', 'help with \\ backslash\nand a newline', ['run']);
    const tricky = 'a"b\\c\nd}{,=';
    g.set({ run: tricky }, 1.5);
    g.set({ run: 'nan' }, NaN);
    g.set({ run: 'inf' }, -Infinity);
    const c = r.counter('x_total', 'a counter');
    c.inc();
    c.inc({}, 2);
    const p = parseExposition(r.render());
    expect(p.help.get('x_gauge')).toBe('help with \\ backslash\nand a newline');
    expect(p.type.get('x_total')).toBe('counter');
    expect(find(p, 'x_gauge', { run: tricky })).toBe(1.5);
    expect(find(p, 'x_gauge', { run: 'nan' })).toBeNaN();
    expect(find(p, 'x_gauge', { run: 'inf' })).toBe(-Infinity);
    expect(find(p, 'x_total')).toBe(3);
  });

  it('refuses invalid names, label sets and counter decrements', () => {
    const r = new MetricsRegistry();
    expect(() => r.gauge('bad-name', 'x')).toThrow();
    expect(() => r.gauge('ok', 'x', ['__reserved'])).toThrow();
    const g = r.gauge('g', 'x', ['run']);
    expect(() => g.set({ other: '1' }, 1)).toThrow();
    expect(() => r.gauge('g', 'again')).toThrow();
    expect(() => r.counter('c_total', 'x').inc({}, -1)).toThrow();
  });
});

describe('RelayMetrics from a CoordinatorState', () => {
  it('reports clients by state, step, quorum and bytes; forgets deleted runs', async () => {
    const run = parseRunConfig(DEFAULT_RUN_TOML).config;
    let state: CoordinatorState = createCoordinator({
      run_id: 'run "one"',
      run_seed: '11'.repeat(32),
      config: coordinatorConfigOf(run),
      now: 1000,
    });
    for (const id of ['aa', 'bb', 'cc']) {
      const r = tick(state, { type: 'join', id: id.repeat(32), p2p_id: `peer-${id}` }, 1000);
      state = r.state;
    }
    const m = new RelayMetrics();
    m.observeCoordinator(state);
    m.countBytesIn(100);
    m.countBytesOut(7);
    m.setLoss('run "one"', 2.5);
    const app = metricsRoutes(m.registry);
    const res = await app.request('/metrics');
    expect(res.headers.get('Content-Type')).toContain('text/plain; version=0.0.4');
    const p = parseExposition(await res.text());
    const run1 = { run: 'run "one"' };
    expect(find(p, 'meshtrain_clients', { ...run1, state: 'Waiting' })).toBe(3);
    expect(find(p, 'meshtrain_clients', { ...run1, state: 'Healthy' })).toBe(0);
    expect(find(p, 'meshtrain_step', run1)).toBe(state.progress.step);
    expect(find(p, 'meshtrain_run_state', { ...run1, state: state.run_state })).toBe(1);
    expect(find(p, 'meshtrain_quorum', run1)).toBeDefined();
    expect(find(p, 'meshtrain_witnesses', run1)).toBe(0);
    expect(find(p, 'meshtrain_loss', run1)).toBe(2.5);
    expect(find(p, 'meshtrain_bytes_in_total')).toBe(100);
    expect(find(p, 'meshtrain_bytes_out_total')).toBe(7);
    for (const name of ['meshtrain_clients', 'meshtrain_round_height', 'meshtrain_step', 'meshtrain_quorum'])
      expect(p.type.get(name)).toBe('gauge');

    m.forgetRun('run "one"');
    const after = parseExposition(m.registry.render());
    expect(after.samples.filter((s) => s.labels.run !== undefined)).toEqual([]);
    expect(find(after, 'meshtrain_bytes_in_total')).toBe(100);
  });
});
