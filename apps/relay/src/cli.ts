// meshtrain-relay: the relay's CLI. Each subcommand is one module in ./commands/ exporting a `Command`; the
// dispatcher finds them by file name, so adding a command never touches this file.
import { readdirSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CliError, EXIT_USAGE, type Command } from './command.ts';

const commandsDir = fileURLToPath(new URL('./commands/', import.meta.url));

function commandNames(): string[] {
  return readdirSync(commandsDir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .map((f) => basename(f, '.ts'))
    .sort();
}

async function load(name: string): Promise<Command> {
  const mod = (await import(pathToFileURL(`${commandsDir}${name}.ts`).href)) as { default: Command };
  return mod.default;
}

async function usage(): Promise<string> {
  const lines = ['usage: meshtrain-relay <command> [options]', '', 'commands:'];
  for (const name of commandNames()) lines.push(`  ${name.padEnd(18)} ${(await load(name)).summary}`);
  lines.push('', 'meshtrain-relay <command> --help shows the arguments of one command.');
  return lines.join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    console.error(await usage());
    return EXIT_USAGE;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    console.log(await usage());
    return 0;
  }
  if (!commandNames().includes(name)) throw new CliError(`unknown command '${name}'\n\n${await usage()}`);
  const command = await load(name);
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(`usage: meshtrain-relay ${name} ${command.usage}\n\n${command.summary}`);
    return 0;
  }
  return command.run(rest);
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (!(err instanceof CliError)) throw err;
  console.error(`meshtrain-relay: ${err.message}`);
  process.exitCode = err.exitCode;
}
