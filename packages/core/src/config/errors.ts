/** One problem in a run config: the dotted key path it is about (`<toml>` for syntax errors) and why. */
export interface ConfigIssue {
  path: string;
  message: string;
}

/** Thrown by `parseRunConfig` with every problem found, not just the first, so one edit can fix them all. */
export class RunConfigError extends Error {
  readonly issues: readonly ConfigIssue[];
  constructor(issues: readonly ConfigIssue[]) {
    const n = issues.length;
    super(
      `invalid run config (${n} ${n === 1 ? 'error' : 'errors'}):\n${issues.map((i) => `  ${formatIssue(i)}`).join('\n')}`,
    );
    this.name = 'RunConfigError';
    this.issues = issues;
  }
}

export function formatIssue(issue: ConfigIssue): string {
  return `${issue.path}: ${issue.message}`;
}

/** Dotted key path as written in TOML; array elements as `[i]`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out === '' ? '<root>' : out;
}
