// `meshtrain-relay validate-config FILE [--json]`: checks a run config without starting anything.
// Exit 0: valid (one summary line, then a note per unsupported feature or conversion); 1: invalid (every
// error with its key path); 2: usage error or unreadable file.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseRunConfig, RunConfigError, type ConfigNote, type ParsedRunConfig } from '@meshtrain/core';
import { CliError, type Command } from '../command.ts';

function readConfigFile(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : (err as Error).message;
    throw new CliError(`cannot read ${file}: ${why}`);
  }
}

function noteLines(parsed: ParsedRunConfig): string[] {
  const line = (n: ConfigNote) => `note: ${n.path}: ${n.reason}`;
  return [...parsed.unsupported.map(line), ...parsed.notes.map(line)];
}

function validate(file: string, json: boolean): number {
  const text = readConfigFile(file);
  try {
    const parsed = parseRunConfig(text);
    if (json) {
      const { summary, unsupported, notes, config } = parsed;
      console.log(JSON.stringify({ ok: true, file, summary, unsupported, notes, config }, null, 2));
    } else {
      console.log([`ok: ${parsed.summary}`, ...noteLines(parsed)].join('\n'));
    }
    return 0;
  } catch (err) {
    if (!(err instanceof RunConfigError)) throw err;
    if (json) {
      console.log(JSON.stringify({ ok: false, file, issues: err.issues }, null, 2));
    } else {
      const n = err.issues.length;
      const lines = err.issues.map((i) => `error: ${i.path}: ${i.message}`);
      console.error(
        [`${file}: invalid run config (${n} ${n === 1 ? 'error' : 'errors'})`, ...lines].join('\n'),
      );
    }
    return 1;
  }
}

const command: Command = {
  summary: 'check a run config (Psyche [config]/[model.LLM] keys plus [meshtrain]) and summarise it',
  usage: 'FILE [--json]',
  async run(argv) {
    let parsed;
    try {
      parsed = parseArgs({
        args: argv,
        options: { json: { type: 'boolean' } },
        allowPositionals: true,
        strict: true,
      });
    } catch (err) {
      throw new CliError(
        `validate-config: ${(err as Error).message}\nusage: meshtrain-relay validate-config FILE [--json]`,
      );
    }
    const [file, ...extra] = parsed.positionals;
    if (file === undefined || extra.length > 0)
      throw new CliError(
        `validate-config: ${file === undefined ? 'missing FILE' : `expected one FILE, got ${parsed.positionals.length}`}` +
          '\nusage: meshtrain-relay validate-config FILE [--json]',
      );
    return validate(file, parsed.values.json === true);
  },
};

export default command;
