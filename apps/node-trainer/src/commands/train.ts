// node-trainer train: join a run on a relay and train until it finishes (src/train/: flags, setup, session).
import type { Command } from '../command.ts';
import { output, parseTrainOptions, TRAIN_USAGE } from '../train/options.ts';
import { train } from '../train/session.ts';

const command: Command = {
  summary: 'join a run on a relay and train (DisTrO or SparseLoCo over ONNX Runtime) until it finishes',
  usage: TRAIN_USAGE,
  async run(argv) {
    const o = parseTrainOptions(argv);
    return train(o, output(o.json));
  },
};

export default command;
