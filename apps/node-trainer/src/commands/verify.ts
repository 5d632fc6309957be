// node-trainer verify: join a run to verify only (docs/protocol.md "Trust: anchors, verified history and
// probation"). The process follows the run as a trainer does — parameters, rounds, checkpoints — but joins
// flagged verify-only (its Join's device kind starts with core's VERIFY_ONLY_DEVICE_PREFIX), so the
// coordinator never puts it in a round's roster: it trains nothing, witnesses nothing, counts in no quorum, and
// is drawn as a verifier of sampled results. With its key in the run's `trusted_verifiers`, it checks every
// result of identities on probation.
import { CliError, type Command } from '../command.ts';
import { ADVERSARY_USAGE } from '../train/adversary.ts';
import { output, parseTrainOptions, TRAIN_USAGE } from '../train/options.ts';
import { train } from '../train/session.ts';

const command: Command = {
  summary: 'join a run on a relay to verify only: never trains, checks the results assigned to it',
  // train's flags without its test-only attacker ones.
  usage: TRAIN_USAGE.slice(0, TRAIN_USAGE.length - ADVERSARY_USAGE.length),
  async run(argv) {
    const o = parseTrainOptions(argv);
    if (o.adversary !== undefined)
      throw new CliError('verify: --adversary is for train (local-testnet) only');
    return train({ ...o, verifyOnly: true }, output(o.json));
  },
};

export default command;
