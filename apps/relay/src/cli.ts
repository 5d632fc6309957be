// meshtrain-relay: the relay's CLI. Each subcommand is one module in ./commands/ exporting a `Command`;
// @meshtrain/cli's dispatcher (shared with node-trainer) finds them by file name, so adding a command never
// touches this file.
import { runCli } from '@meshtrain/cli';

await runCli({ program: 'meshtrain-relay', commandsDir: new URL('./commands/', import.meta.url) });
