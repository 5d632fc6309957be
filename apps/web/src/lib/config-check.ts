// Validates run TOML in the browser with core's parser: the same checks the relay runs, with key paths.
import { parseRunConfig, RunConfigError } from '@meshtrain/core';
import type { ConfigIssue, ConfigNote } from '@meshtrain/core';

export type ConfigCheck =
  | { ok: true; runId: string | null; summary: string; notes: ConfigNote[]; unsupported: ConfigNote[] }
  | { ok: false; issues: ConfigIssue[] };

export function checkRunToml(text: string): ConfigCheck {
  try {
    const p = parseRunConfig(text);
    return {
      ok: true,
      runId: p.config.run_id ?? null,
      summary: p.summary,
      notes: p.notes,
      unsupported: p.unsupported,
    };
  } catch (e) {
    if (e instanceof RunConfigError) return { ok: false, issues: [...e.issues] };
    return { ok: false, issues: [{ path: '<parser>', message: e instanceof Error ? e.message : String(e) }] };
  }
}

/** The embedded default run with another run id, as a starting point for the editor. */
export function templateToml(defaultToml: string, runId: string): string {
  return defaultToml.replace(/^run_id = ".*"$/m, `run_id = "${runId}"`);
}
