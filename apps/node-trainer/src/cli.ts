// node-trainer: the GPU owner's CLI. Each subcommand is one module in ./commands/ exporting a `Command`;
// @meshtrain/cli's dispatcher (shared with meshtrain-relay) finds them by file name.
import { runCli } from '@meshtrain/cli';

await runCli({ program: 'node-trainer', commandsDir: new URL('./commands/', import.meta.url) });
