// What a reply must look like before a caller reads it as the typed shape: the fields callers act on are
// checked (types, non-negative integers where they index or count); free-form parts (a round's `accepted`,
// transitions' events) are taken as they come. Each check returns null, or what is wrong.

type Kind = 'string' | 'number' | 'boolean' | 'object' | 'array' | 'count' | 'string[]';

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fits(v: unknown, kind: Kind): boolean {
  switch (kind) {
    case 'object':
      return isObject(v);
    case 'array':
      return Array.isArray(v);
    case 'count':
      return Number.isSafeInteger(v) && (v as number) >= 0;
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    case 'string[]':
      return Array.isArray(v) && v.every((x) => typeof x === 'string');
    default:
      return typeof v === kind;
  }
}

/** Null when `v` is an object whose fields have these kinds, else the first mismatch (named by `at`). */
function fields(v: unknown, at: string, spec: Record<string, Kind>): string | null {
  if (!isObject(v)) return `${at} is not an object`;
  for (const [key, kind] of Object.entries(spec))
    if (!fits(v[key], kind)) return `${at}.${key} is not ${kind === 'count' ? 'a count' : `a ${kind}`}`;
  return null;
}

const RUN_SUMMARY: Record<string, Kind> = {
  run_id: 'string',
  run_state: 'string',
  epoch: 'count',
  step: 'count',
  total_steps: 'count',
};

export function checkRunList(v: unknown): string | null {
  const top = fields(v, 'reply', { runs: 'array', p2p_multiaddrs: 'string[]' });
  if (top !== null) return top;
  const runs = (v as { runs: unknown[] }).runs;
  for (let i = 0; i < runs.length; i++) {
    const bad = fields(runs[i], `runs[${i}]`, RUN_SUMMARY);
    if (bad !== null) return bad;
  }
  return null;
}

export function checkRunDetail(v: unknown): string | null {
  return (
    fields(v, 'reply', {
      run: 'object',
      config: 'object',
      p2p_multiaddrs: 'string[]',
      clients: 'array',
      rounds: 'array',
      reports: 'array',
      grants: 'array',
      param_hashes: 'array',
      transitions: 'array',
    }) ??
    fields((v as { run: unknown }).run, 'run', RUN_SUMMARY) ??
    fields((v as { config: unknown }).config, 'config', { toml: 'string' })
  );
}

export function checkCheckpointSummary(v: unknown): string | null {
  const bad = fields(v, 'reply', { step: 'count', epoch: 'count', paramHash: 'string', files: 'object' });
  if (bad !== null) return bad;
  const files = (v as { files: Record<string, unknown> }).files;
  return Object.values(files).every((u) => typeof u === 'string') ? null : 'files are not URLs';
}

export function checkDataManifest(v: unknown): string | null {
  return (
    fields(v, 'reply', { samples: 'object', sample_tokens: 'count', max_samples_per_request: 'count' }) ??
    fields((v as { samples: unknown }).samples, 'samples', { train: 'count', val: 'count' }) ??
    // Clients fold run ids into the split or not by it: an order they do not know is an error, not a guess.
    (['corpus', 'seeded'].includes((v as { order: unknown }).order as string)
      ? null
      : "reply.order is not 'corpus' or 'seeded'")
  );
}
