// node-trainer: the GPU owner's CLI. Each subcommand is one module in ./commands/ exporting a `Command`;
// the dispatcher discovers them by file name so commands stay independent of each other.
import { readdirSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CliError, type Command } from './command.ts';

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
  const lines = ['usage: node-trainer <command> [options]', '', 'commands:'];
  for (const name of commandNames()) lines.push(`  ${name.padEnd(16)} ${(await load(name)).summary}`);
  lines.push('', 'node-trainer <command> --help shows the options of one command.');
  return lines.join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(await usage());
    return name ? 0 : 2;
  }
  if (!commandNames().includes(name)) {
    console.error(`node-trainer: unknown command '${name}'\n\n${await usage()}`);
    return 2;
  }
  const command = await load(name);
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(`usage: node-trainer ${name} ${command.usage}\n\n${command.summary}`);
    return 0;
  }
  return command.run(rest);
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (err instanceof CliError) {
    console.error(`node-trainer: ${err.message}`);
    process.exitCode = err.exitCode;
  } else {
    throw err;
  }
}
