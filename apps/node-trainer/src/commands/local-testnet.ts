// node-trainer local-testnet: a relay and N trainers on loopback (child processes), optionally killing K
// random trainers every SEC seconds, optionally with adversaries; stdout ends with one JSON object
// summarising the run.
import { CliError, type Command } from '../command.ts';
import { intFlag, parseFlags } from '../options/index.ts';
import { DEFAULT_SYBILS, parseAdversarySpec, type AdversarySpec } from '../testnet/adversaries.ts';
import { TESTNET_DEFAULTS as D } from '../testnet/defaults.ts';
import { runWithHonestBaseline, type HonestComparison } from '../testnet/compare.ts';
import { EXIT_GRACE_S, runTestnet, type TestnetOptions, type TestnetResult } from '../testnet/index.ts';
import { ADVERSARY_NAMES } from '../train/adversary.ts';

const USAGE =
  '--num-clients N [--steps S] [--random-kill-num K] [--random-kill-interval SEC] [--preset micro|tiny] ' +
  '[--adversary KIND[:N]]... [--json]\n\n' +
  '  --num-clients N            trainers (child processes running `node-trainer train`)\n' +
  `  --steps S                  the run's total_steps (default ${D.steps})\n` +
  '  --random-kill-num K        trainers to SIGKILL every interval, then restart (default 0)\n' +
  `  --random-kill-interval SEC seconds between kills (default ${D.randomKillInterval})\n` +
  '  --preset P                 micro (default) or tiny\n' +
  '  --adversary KIND[:N]       N more trainers (default 1) that attack the run as KIND (repeatable):\n' +
  `                             ${ADVERSARY_NAMES.join(', ')};\n` +
  `                             sybil:N is one process joining N identities (default ${DEFAULT_SYBILS}) that collude:\n` +
  '                             random results every round, attesting and passing each other, failing\n' +
  '                             every honest result they verify; sybil-veto:N also withholds witness\n' +
  '                             votes from honest results; sybil-idle:N only joins; lying-verifier:N\n' +
  '                             trains honestly but fails every honest result it verifies; every-third\n' +
  '                             sends random signs instead of every third result\n' +
  "  --max-identities-per-address N  the relay's cap (default: the relay's): every process here shares 127.0.0.1\n" +
  "  --trusted-verifiers N      N more processes running `node-trainer verify`, their keys in the run's\n" +
  '                             trusted_verifiers (default 0: a run without anchor, which warns)\n' +
  '  --compare-honest           then run the same steps without the adversaries (same seed and global\n' +
  '                             batch) and report both final held-out losses (compare_honest)\n' +
  '  --late-joiners N           honest trainers started once the run trains: they join the next epoch\n' +
  '  --replica full|light       how the honest trainers follow the coordinator (train --replica; default light)\n' +
  '  --epoch-time SEC           seconds per epoch, ≥ 30 (default: one epoch, or two kill intervals with kills)\n' +
  `  --round-witness-time SEC   seconds every round waits in RoundWitness (default ${D.roundWitnessTime}): a floor on round length\n` +
  `  --verification-percent P   the run's verification_percent (default ${D.verificationPercent})\n` +
  '  --inner-steps H            train with SparseLoCo, H inner AdamW steps per round (default: DisTrO)\n' +
  `  --join-pow-bits B          the relay's join puzzle (default ${D.joinPowBits}, cheap: all trainers share this machine)\n` +
  "  --p2p-host H               the trainers' libp2p interface (default 127.0.0.1: no WebRTC; 0.0.0.0: WebRTC)\n" +
  `  --seed N                   the run's seed, which draws its initial parameters (default ${D.seed})\n` +
  `  --timeout SEC              give up after this long (default ${D.timeoutSeconds})\n` +
  '  --keep                     keep the temp directory (logs, relay database)\n' +
  '  --json                     progress on stderr only; stdout is the JSON object';

function adversaries(values: string[] | undefined): AdversarySpec[] {
  return (values ?? []).map((v) => {
    const spec = parseAdversarySpec(v);
    if (typeof spec === 'string') throw new CliError(`--adversary: ${spec}`);
    return spec;
  });
}

/** The attackers' share of applied results per epoch, and the honest-only comparison when there is one. */
function hostileLine(r: TestnetResult & { compare_honest?: HonestComparison }): string {
  const pct = (x: number | null) => (x === null ? '–' : `${Math.round(100 * x)}%`);
  const shares = r.by_epoch.map((e) => `${e.epoch}: ${pct(e.attacker_share)}`).join(', ');
  const c = r.compare_honest;
  return (
    `local-testnet: attackers' share of applied results by epoch ${shares}; ` +
    `${r.fabricated_applied} fabricated results applied` +
    (r.trusted_verifiers > 0
      ? `; ${r.by_epoch.reduce((n, e) => n + e.attacker_accusations_refuted, 0)} of their accusations refuted by a trusted verifier`
      : '') +
    (c
      ? `; held-out loss ${c.loss_attacked?.toFixed(4) ?? '?'} attacked, ${c.loss_honest?.toFixed(4) ?? '?'} ` +
        `without the attackers (${c.relative_difference === null ? '?' : `${(100 * c.relative_difference).toFixed(1)}%`})`
      : '')
  );
}

function oneLine(r: TestnetResult, numClients: number): string {
  const base =
    `local-testnet: ${r.completed ? 'completed' : 'DID NOT complete'} ${r.steps_completed} steps with ${numClients} trainers in ${r.seconds}s; ` +
    `held-out loss ${r.loss_first?.toFixed(4) ?? '?'} → ${r.loss_last?.toFixed(4) ?? '?'}; ` +
    `${r.param_hash_mismatches} hash mismatches, ${r.quorum_failures} quorum failures; ` +
    `${r.bytes_sent_per_step} B per result (${r.ratio_vs_fp32}× smaller than fp32); ` +
    `${r.trainers_not_exited} trainers did not exit within ${EXIT_GRACE_S} s of done` +
    ` (slowest ${Math.max(0, ...r.trainer_exits.map((x) => x.seconds_done_to_exit ?? 0))} s)`;
  const warnings = r.trust_warnings.map(
    (w) => `\nlocal-testnet: WARNING: the run may be attacker-controlled: ${w}`,
  );
  if (r.adversaries.length === 0) return base + warnings.join('');
  return (
    `${base}${warnings.join('')}\nlocal-testnet: adversaries ${r.adversaries.map((a) => `${a.kind}:${a.count}`).join(', ')}: ` +
    `${r.cheaters_ejected} ejected, ${r.cheater_results_applied} of their results still applied, ` +
    `${r.honest_dropped} honest trainers dropped\n${hostileLine(r)}`
  );
}

const FLAGS = {
  'num-clients': { type: 'string' },
  steps: { type: 'string' },
  'random-kill-num': { type: 'string' },
  'random-kill-interval': { type: 'string' },
  preset: { type: 'string' },
  adversary: { type: 'string', multiple: true },
  'late-joiners': { type: 'string' },
  replica: { type: 'string' },
  'epoch-time': { type: 'string' },
  'round-witness-time': { type: 'string' },
  'verification-percent': { type: 'string' },
  'inner-steps': { type: 'string' },
  'join-pow-bits': { type: 'string' },
  'p2p-host': { type: 'string' },
  'max-identities-per-address': { type: 'string' },
  'compare-honest': { type: 'boolean' },
  'trusted-verifiers': { type: 'string' },
  timeout: { type: 'string' },
  seed: { type: 'string' },
  keep: { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

type Values = ReturnType<typeof parseFlags<typeof FLAGS>>['values'];

/** The run the flags describe; flags that contradict each other are refused before anything starts. */
function testnetOptions(values: Values): TestnetOptions {
  if (values['num-clients'] === undefined) throw new CliError('--num-clients N is required');
  const numClients = intFlag('num-clients', values['num-clients'], 1, 1);
  const preset = values.preset ?? 'micro';
  if (preset !== 'micro' && preset !== 'tiny') throw new CliError(`--preset: micro or tiny, got '${preset}'`);
  const randomKillNum = intFlag('random-kill-num', values['random-kill-num'], 0, 0);
  if (randomKillNum >= numClients && randomKillNum > 0)
    throw new CliError('--random-kill-num must leave at least one trainer alive');
  const replica = values.replica ?? 'light';
  if (replica !== 'full' && replica !== 'light')
    throw new CliError(`--replica: full or light, got '${replica}'`);
  const verificationPercent = intFlag(
    'verification-percent',
    values['verification-percent'],
    D.verificationPercent,
    0,
  );
  if (verificationPercent > 100) throw new CliError('--verification-percent: at most 100');
  const options: TestnetOptions = {
    numClients,
    steps: intFlag('steps', values.steps, D.steps, 1),
    preset,
    randomKillNum,
    randomKillInterval: intFlag(
      'random-kill-interval',
      values['random-kill-interval'],
      D.randomKillInterval,
      1,
    ),
    timeoutSeconds: intFlag('timeout', values.timeout, D.timeoutSeconds, 10),
    seed: intFlag('seed', values.seed, D.seed, 0),
    keep: Boolean(values.keep),
    adversaries: adversaries(values.adversary),
    lateJoiners: intFlag('late-joiners', values['late-joiners'], 0, 0),
    replica,
    ...(values['epoch-time'] ? { epochTime: intFlag('epoch-time', values['epoch-time'], 0, 30) } : {}),
    ...(values['round-witness-time']
      ? {
          roundWitnessTime: intFlag(
            'round-witness-time',
            values['round-witness-time'],
            D.roundWitnessTime,
            1,
          ),
        }
      : {}),
    verificationPercent,
    ...(values['inner-steps'] ? { innerSteps: intFlag('inner-steps', values['inner-steps'], 1, 1) } : {}),
    joinPowBits: intFlag('join-pow-bits', values['join-pow-bits'], D.joinPowBits, 0),
    ...(values['p2p-host'] ? { p2pHost: values['p2p-host'] } : {}),
    ...(values['max-identities-per-address']
      ? {
          maxIdentitiesPerAddress: intFlag(
            'max-identities-per-address',
            values['max-identities-per-address'],
            16,
            1,
          ),
        }
      : {}),
    trustedVerifiers: intFlag('trusted-verifiers', values['trusted-verifiers'], 0, 0),
    log: (line) => process.stderr.write(`local-testnet: ${line}\n`),
  };
  if ((options.trustedVerifiers ?? 0) > 0 && verificationPercent === 0)
    throw new CliError('--trusted-verifiers: a run with trusted verifiers needs --verification-percent > 0');
  if (values['compare-honest'] && options.adversaries?.length === 0)
    throw new CliError('--compare-honest compares against an attacked run: add --adversary');
  return options;
}

const command: Command = {
  summary: 'run a relay and N trainers on loopback (optionally killing some) and summarise the run as JSON',
  usage: USAGE,
  async run(argv) {
    const { values } = parseFlags(argv, FLAGS);
    const options = testnetOptions(values);
    const numClients = options.numClients;
    const run = values['compare-honest'] ? runWithHonestBaseline(options) : runTestnet(options);
    const result = await run.catch((e: unknown) => {
      throw new CliError(`local-testnet: ${(e as Error).message}`, 1);
    });
    if (!values.json) console.log(oneLine(result, numClients));
    console.log(JSON.stringify(result));
    const ok =
      result.completed &&
      result.param_hash_mismatches === 0 &&
      result.honest_dropped === 0 &&
      result.trainers_not_exited === 0;
    return ok ? 0 : 1;
  },
};

export default command;
