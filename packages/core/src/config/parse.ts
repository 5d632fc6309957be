import { parse as parseToml, TomlError } from 'smol-toml';
import type { z } from 'zod';
import { RunConfigError, type ConfigIssue } from './errors.ts';
import { normalize } from './normalize.ts';
import { sanityIssues } from './sanity.ts';
import { runConfigDocument, type RunConfigDocument } from './schema.ts';
import { summarizeRunConfig } from './summary.ts';
import type { ParsedRunConfig } from './types.ts';
import { withUnknownsAt } from './unknown.ts';
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

/** The keys whose values failed the schema. An unknown key says nothing about the table that holds it. */
function failedPaths(error: z.ZodError): PropertyKey[][] {
  return error.issues.filter((i) => i.code !== 'unrecognized_keys').map((i) => i.path);
}

/** Whether `path` is, or lies inside, a key that already has an error. */
function coveredBy(reported: readonly ConfigIssue[], path: string): boolean {
  return reported.some(
    (r) => path === r.path || path.startsWith(`${r.path}.`) || path.startsWith(`${r.path}[`),
  );
}

/**
 * Parses and validates a run config (Psyche's `[config]` and `[model.LLM]` plus meshtrain's `[meshtrain]`).
 * Throws RunConfigError listing every problem with its key path; features meshtrain cannot run yet are
 * returned in `unsupported`, not thrown.
 */
export function parseRunConfig(tomlText: string): ParsedRunConfig {
  const doc = readToml(tomlText);
  const checked = runConfigDocument.safeParse(doc);
  // One pass reports every error: where keys fail the schema, the cross-key rules still run on the keys that
  // did parse, with the failed ones unknown; a rule needing an unknown value is skipped, and no rule adds a
  // second error to a key that already has one.
  const schemaIssues = checked.success ? [] : configIssuesFromZod(checked.error, doc, runConfigDocument);
  const document = checked.success
    ? checked.data
    : // Outside the failed paths the raw document is what the schema would have produced: its transforms
      // only narrow types, they do not change values.
      (withUnknownsAt(doc, failedPaths(checked.error)) as RunConfigDocument);

  const { run, notes, issues } = normalize(document);
  const ruleIssues = [...issues, ...sanityIssues(run)].filter((i) => !coveredBy(schemaIssues, i.path));
  const allIssues = [...schemaIssues, ...ruleIssues];
  // `run` holds an unknown value only where an issue was reported, so a run that gets past here is complete.
  if (allIssues.length > 0) throw new RunConfigError(allIssues);

  return {
    config: run,
    unsupported: unsupportedFeatures(run, document),
    notes,
    summary: summarizeRunConfig(run),
  };
}
