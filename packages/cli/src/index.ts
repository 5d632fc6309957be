// @meshtrain/cli: the command dispatcher that meshtrain-relay and node-trainer share. Each CLI is a folder of
// subcommand modules, one file per command exporting a `Command`; the dispatcher finds them by file name, so
// adding a command never touches the dispatcher, and both CLIs answer `--help`, usage mistakes and failures
// the same way:
//   no command            → the usage on stderr, exit 2
//   --help | -h | help    → the usage on stdout, exit 0
//   unknown command       → "<prog>: unknown command 'x'" and the usage on stderr, exit 2
//   <command> --help      → the command's usage on stdout, exit 0
//   CliError thrown       → "<prog>: <message>" on stderr, its exit code (2 unless it says otherwise)
//   any other error       → "<prog>: <message>" and the stack on stderr, exit 1
import { readdirSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The contract between the dispatcher and one subcommand module (its default export). */
export interface Command {
  /** One line for `<prog> --help`. */
  summary: string;
  /** Options and arguments after the command name, e.g. `FILE [--json]`, then any explanation. */
  usage: string;
  /** Runs the command; resolves to the process exit code. */
  run(argv: string[]): Promise<number>;
}

/** Exit status for usage errors and unreadable inputs; 1 is kept for "the input is invalid" and failures. */
export const EXIT_USAGE = 2;
export const EXIT_FAILURE = 1;

/** An error the user can fix (bad flag, missing file): printed as one line, without a stack trace. */
export class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = EXIT_USAGE) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

export interface CliOptions {
  /** The program's name, as users type it (`node-trainer`). */
  program: string;
  /** The folder of subcommand modules (`new URL('./commands/', import.meta.url)`). */
  commandsDir: URL;
  /** Where output goes (tests pass their own). */
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
}

function commandNames(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && !f.endsWith('.d.ts'))
    .map((f) => basename(f, '.ts'))
    .sort();
}

async function load(dir: string, name: string): Promise<Command> {
  const mod = (await import(pathToFileURL(`${dir}${name}.ts`).href)) as { default: Command };
  return mod.default;
}

async function usage(program: string, dir: string): Promise<string> {
  const names = commandNames(dir);
  const width = Math.max(16, ...names.map((n) => n.length + 2));
  const lines = [`usage: ${program} <command> [options]`, '', 'commands:'];
  for (const name of names) lines.push(`  ${name.padEnd(width)} ${(await load(dir, name)).summary}`);
  lines.push('', `${program} <command> --help shows the options of one command.`);
  return lines.join('\n');
}

async function route(o: CliOptions, argv: string[], out: (t: string) => void, err: (t: string) => void) {
  const dir = fileURLToPath(o.commandsDir).replace(/\/?$/, '/');
  const [name, ...rest] = argv;
  if (name === undefined) {
    err(await usage(o.program, dir));
    return EXIT_USAGE;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    out(await usage(o.program, dir));
    return 0;
  }
  if (!commandNames(dir).includes(name))
    throw new CliError(`unknown command '${name}'\n\n${await usage(o.program, dir)}`);
  const command = await load(dir, name);
  if (rest.includes('--help') || rest.includes('-h')) {
    out(`usage: ${o.program} ${name} ${command.usage}\n\n${command.summary}`);
    return 0;
  }
  return command.run(rest);
}

/** Runs the command `argv` names and resolves to the exit code; never throws. */
export async function dispatch(o: CliOptions, argv: readonly string[]): Promise<number> {
  const out = o.stdout ?? ((t: string) => console.log(t));
  const err = o.stderr ?? ((t: string) => console.error(t));
  try {
    return await route(o, [...argv], out, err);
  } catch (e) {
    if (e instanceof CliError) {
      err(`${o.program}: ${e.message}`);
      return e.exitCode;
    }
    const error = e instanceof Error ? e : new Error(String(e));
    err(`${o.program}: ${error.message}\n${error.stack ?? ''}`);
    return EXIT_FAILURE;
  }
}

/** The CLI's entry point: dispatches the process's arguments and sets its exit code. */
export async function runCli(o: CliOptions): Promise<void> {
  process.exitCode = await dispatch(o, process.argv.slice(2));
}
