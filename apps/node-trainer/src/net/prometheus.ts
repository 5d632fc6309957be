// A reader for the Prometheus text exposition format (what the relay's /metrics serves): samples only,
// HELP/TYPE lines skipped. Enough for summaries; not a general-purpose parser (no timestamps, no exemplars).
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL))
      labels[l[1] as string] = (l[2] as string).replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1');
    const v = m[3] as string;
    const value = v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v);
    out.push({ name: m[1] as string, labels, value });
  }
  return out;
}

/** The value of `name` whose labels include `match`, or undefined. */
export function valueOf(
  samples: readonly Sample[],
  name: string,
  match: Record<string, string> = {},
): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    ?.value;
}
