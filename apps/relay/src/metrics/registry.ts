// A small Prometheus registry: counters and gauges with labels, and unlabelled histograms, rendered in the
// text exposition format (version 0.0.4). We need only these and a few dozen series, so a dependency
// (prom-client) would be more code than this file. Rules followed:
//   - `# HELP name text` escapes `\` and newline; `# TYPE name counter|gauge`; one block per metric.
//   - label values escape `\`, `"` and newline; names are checked against the format's grammar;
//   - values: integers as written, NaN, +Inf, -Inf spelled as Prometheus parses them.

export type Labels = Record<string, string>;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

abstract class Metric {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  abstract readonly type: 'counter' | 'gauge';
  /** Series by their canonical label key (values joined in labelNames order). */
  protected readonly series = new Map<string, { labels: Labels; value: number }>();

  constructor(name: string, help: string, labelNames: readonly string[]) {
    if (!METRIC_NAME.test(name)) throw new Error(`metric name '${name}' is not valid in Prometheus`);
    for (const l of labelNames)
      if (!LABEL_NAME.test(l) || l.startsWith('__'))
        throw new Error(`label name '${l}' of ${name} is not valid in Prometheus`);
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
  }

  /** Canonical key; throws when the label set differs from the declared one (a programming error). */
  protected key(labels: Labels): string {
    const given = Object.keys(labels);
    if (given.length !== this.labelNames.length || given.some((l) => !this.labelNames.includes(l)))
      throw new Error(`${this.name}: labels {${given.join(',')}} differ from {${this.labelNames.join(',')}}`);
    return JSON.stringify(this.labelNames.map((l) => labels[l]));
  }

  protected entry(labels: Labels): { labels: Labels; value: number } {
    const k = this.key(labels);
    let e = this.series.get(k);
    if (e === undefined) {
      e = { labels: { ...labels }, value: 0 };
      this.series.set(k, e);
    }
    return e;
  }

  get(labels: Labels = {}): number | undefined {
    return this.series.get(this.key(labels))?.value;
  }

  /** Drops one series (e.g. a deleted run), or every series whose labels include `match`. */
  remove(match: Labels): void {
    for (const [k, e] of this.series)
      if (Object.entries(match).every(([l, v]) => e.labels[l] === v)) this.series.delete(k);
  }

  render(): string {
    let out = `# HELP ${this.name} ${escapeHelp(this.help)}\n# TYPE ${this.name} ${this.type}\n`;
    for (const { labels, value } of this.series.values()) {
      const ls = this.labelNames.map((l) => `${l}="${escapeLabelValue(labels[l] ?? '')}"`).join(',');
      out += `${this.name}${ls === '' ? '' : `{${ls}}`} ${formatValue(value)}\n`;
    }
    return out;
  }
}

/** Monotonic: only `inc` with a non-negative amount. */
export class Counter extends Metric {
  readonly type = 'counter';
  inc(labels: Labels = {}, by = 1): void {
    if (!(by >= 0)) throw new Error(`${this.name}: a counter cannot change by ${by}`);
    this.entry(labels).value += by;
  }
}

export class Gauge extends Metric {
  readonly type = 'gauge';
  set(labels: Labels, value: number): void {
    this.entry(labels).value = value;
  }
  inc(labels: Labels = {}, by = 1): void {
    this.entry(labels).value += by;
  }
}

/**
 * Cumulative buckets (`_bucket{le}`, `_sum`, `_count`), so a reader can take the difference of two scrapes
 * and get the distribution of what happened in between.
 */
export class Histogram {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  /** Upper bounds, ascending; +Inf is implied. */
  readonly bounds: readonly number[];
  private readonly counts: number[];
  private sum = 0;
  private count = 0;

  constructor(name: string, help: string, bounds: readonly number[]) {
    if (!METRIC_NAME.test(name)) throw new Error(`metric name '${name}' is not valid in Prometheus`);
    if (bounds.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= bounds[i - 1]!)))
      throw new Error(`${name}: bucket bounds must be finite and ascending`);
    this.name = name;
    this.help = help;
    this.bounds = bounds;
    this.counts = new Array<number>(bounds.length).fill(0);
  }

  observe(v: number): void {
    for (let i = 0; i < this.bounds.length; i++) if (v <= this.bounds[i]!) this.counts[i]!++;
    this.sum += v;
    this.count++;
  }

  render(): string {
    let out = `# HELP ${this.name} ${escapeHelp(this.help)}\n# TYPE ${this.name} histogram\n`;
    this.bounds.forEach((b, i) => (out += `${this.name}_bucket{le="${formatValue(b)}"} ${this.counts[i]}\n`));
    out += `${this.name}_bucket{le="+Inf"} ${this.count}\n`;
    out += `${this.name}_sum ${formatValue(this.sum)}\n${this.name}_count ${this.count}\n`;
    return out;
  }
}

export class MetricsRegistry {
  private readonly metrics = new Map<string, Metric | Histogram>();

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.add(new Counter(name, help, labelNames));
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return this.add(new Gauge(name, help, labelNames));
  }

  histogram(name: string, help: string, bounds: readonly number[]): Histogram {
    return this.add(new Histogram(name, help, bounds));
  }

  /** The exposition text: every metric's HELP/TYPE block in registration order. */
  render(): string {
    return [...this.metrics.values()].map((m) => m.render()).join('');
  }

  private add<M extends Metric | Histogram>(m: M): M {
    if (this.metrics.has(m.name)) throw new Error(`metric ${m.name} is registered twice`);
    this.metrics.set(m.name, m);
    return m;
  }
}
