// node-trainer local-testnet: a relay and N trainers on loopback (child processes), optionally killing K
// random trainers every SEC seconds; stdout ends with one JSON object summarising the run.
import { CliError, type Command } from '../command.ts';
import { intFlag, parseFlags } from '../options/index.ts';
import { runTestnet } from '../testnet/index.ts';

const command: Command = {
  summary: 'run a relay and N trainers on loopback (optionally killing some) and summarise the run as JSON',
  usage:
    '--num-clients N [--steps S] [--random-kill-num K] [--random-kill-interval SEC] [--preset micro|tiny] [--json]\n\n' +
    '  --num-clients N            trainers (child processes running `node-trainer train`)\n' +
    "  --steps S                  the run's total_steps (default 40)\n" +
    '  --random-kill-num K        trainers to SIGKILL every interval, then restart (default 0)\n' +
    '  --random-kill-interval SEC seconds between kills (default 20)\n' +
    '  --preset P                 micro (default) or tiny\n' +
    '  --timeout SEC              give up after this long (default 1800)\n' +
    '  --keep                     keep the temp directory (logs, relay database)\n' +
    '  --json                     progress on stderr only; stdout is the JSON object',
  async run(argv) {
    const { values } = parseFlags(argv, {
      'num-clients': { type: 'string' },
      steps: { type: 'string' },
      'random-kill-num': { type: 'string' },
      'random-kill-interval': { type: 'string' },
      preset: { type: 'string' },
      timeout: { type: 'string' },
      seed: { type: 'string' },
      keep: { type: 'boolean' },
      json: { type: 'boolean' },
    });
    if (values['num-clients'] === undefined) throw new CliError('--num-clients N is required');
    const numClients = intFlag('num-clients', values['num-clients'], 1, 1);
    const preset = values.preset ?? 'micro';
    if (preset !== 'micro' && preset !== 'tiny')
      throw new CliError(`--preset: micro or tiny, got '${preset}'`);
    const randomKillNum = intFlag('random-kill-num', values['random-kill-num'], 0, 0);
    if (randomKillNum >= numClients && randomKillNum > 0)
      throw new CliError('--random-kill-num must leave at least one trainer alive');
    const json = Boolean(values.json);
    const result = await runTestnet({
      numClients,
      steps: intFlag('steps', values.steps, 40, 1),
      preset,
      randomKillNum,
      randomKillInterval: intFlag('random-kill-interval', values['random-kill-interval'], 20, 1),
      timeoutSeconds: intFlag('timeout', values.timeout, 1800, 10),
      seed: intFlag('seed', values.seed, 1, 0),
      keep: Boolean(values.keep),
      log: (line) => process.stderr.write(`local-testnet: ${line}\n`),
    }).catch((e: unknown) => {
      throw new CliError(`local-testnet: ${(e as Error).message}`, 1);
    });
    if (!json) {
      console.log(
        `local-testnet: ${result.completed ? 'completed' : 'DID NOT complete'} ${result.steps_completed} steps with ${numClients} trainers in ${result.seconds}s; ` +
          `held-out loss ${result.loss_first?.toFixed(4) ?? '?'} → ${result.loss_last?.toFixed(4) ?? '?'}; ` +
          `${result.param_hash_mismatches} hash mismatches, ${result.quorum_failures} quorum failures; ` +
          `${result.bytes_sent_per_step} B per result (${result.ratio_vs_fp32}× smaller than fp32)`,
      );
    }
    console.log(JSON.stringify(result));
    return result.completed && result.param_hash_mismatches === 0 ? 0 : 1;
  },
};

export default command;
