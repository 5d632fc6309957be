import { parse as parseToml, TomlError } from 'smol-toml';
import { RunConfigError } from './errors.ts';
import { normalize } from './normalize.ts';
import { sanityIssues } from './sanity.ts';
import { runConfigDocument } from './schema.ts';
import { summarizeRunConfig } from './summary.ts';
import type { ParsedRunConfig } from './types.ts';
import { unsupportedFeatures } from './unsupported.ts';
import { configIssuesFromZod } from './zod-issues.ts';

function readToml(text: string): unknown {
  try {
    return parseToml(text);
  } catch (err) {
    if (err instanceof TomlError) {
      const what = (err.message.split('\n')[0] ?? '').replace(/^Invalid TOML document: /, '');
      throw new RunConfigError([
        { path: '<toml>', message: `line ${err.line}, column ${err.column}: ${what}` },
      ]);
    }
    throw err;
  }
}

/**
 * Parses and validates a run config (Psyche's `[config]` and `[model.LLM]` plus meshtrain's `[meshtrain]`).
 * Throws RunConfigError listing every problem with its key path; features meshtrain cannot run yet are
 * returned in `unsupported`, not thrown.
 */
export function parseRunConfig(tomlText: string): ParsedRunConfig {
  const doc = readToml(tomlText);
  const checked = runConfigDocument.safeParse(doc);
  if (!checked.success) throw new RunConfigError(configIssuesFromZod(checked.error, doc, runConfigDocument));

  const { run, notes, issues } = normalize(checked.data);
  if (!run) throw new RunConfigError(issues);
  const allIssues = [...issues, ...sanityIssues(run)];
  if (allIssues.length > 0) throw new RunConfigError(allIssues);

  return {
    config: run,
    unsupported: unsupportedFeatures(run, checked.data),
    notes,
    summary: summarizeRunConfig(run),
  };
}
