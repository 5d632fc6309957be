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
import { monitorEventLoop } from '../src/metrics/event-loop.ts';

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
    m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$/.exec(line);
    if (m) {
      if (out.type.has(m[1]!)) throw new Error(`second TYPE for ${m[1]}`);
      out.type.set(m[1]!, m[2]!);
      continue;
    }
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable line: ${line}`);
    const name = m[1]!;
    const family = /^(.*)_(bucket|sum|count)$/.exec(name)?.[1];
    const histogram = family !== undefined && out.type.get(family) === 'histogram';
    if (!out.type.has(name) && !histogram) throw new Error(`sample ${name} before its TYPE line`);
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

describe('histograms', () => {
  it('render cumulative buckets, sum and count that parse back', () => {
    const r = new MetricsRegistry();
    const h = r.histogram('x_seconds', 'a histogram', [0.01, 0.1, 1]);
    for (const v of [0.005, 0.01, 0.05, 0.5, 3]) h.observe(v);
    const p = parseExposition(r.render());
    expect(p.type.get('x_seconds')).toBe('histogram');
    expect(find(p, 'x_seconds_bucket', { le: '0.01' })).toBe(2);
    expect(find(p, 'x_seconds_bucket', { le: '0.1' })).toBe(3);
    expect(find(p, 'x_seconds_bucket', { le: '1' })).toBe(4);
    expect(find(p, 'x_seconds_bucket', { le: '+Inf' })).toBe(5);
    expect(find(p, 'x_seconds_count')).toBe(5);
    expect(find(p, 'x_seconds_sum')).toBeCloseTo(3.565, 9);
    expect(() => r.histogram('y', 'x', [1, 0.5])).toThrow();
  });

  it("the relay's event-loop lag is sampled while it blocks, and its own CPU share recorded beside it", async () => {
    const r = new MetricsRegistry();
    monitorEventLoop(r);
    await new Promise((res) => setTimeout(res, 50));
    // Busy for 120 ms of this thread's CPU time (more wall time on a loaded machine): the next sample is at
    // least that late, and at least ~110 ms of it is the thread's own work.
    const cpu = () => {
      const u = process.threadCpuUsage();
      return (u.user + u.system) / 1000;
    };
    const spin = cpu() + 120;
    while (cpu() < spin) {
      // spin
    }
    await new Promise((res) => setTimeout(res, 30));
    const p = parseExposition(r.render());
    const late = (name: string) =>
      (find(p, `${name}_count`) ?? 0) - (find(p, `${name}_bucket`, { le: '0.075' }) ?? 0);
    expect(late('meshtrain_event_loop_delay_seconds')).toBeGreaterThanOrEqual(1);
    expect(late('meshtrain_event_loop_busy_delay_seconds')).toBeGreaterThanOrEqual(1);
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
