// node-trainer init-model: a fresh, seeded checkpoint (config.json + model.safetensors) for a preset.
import { createHash } from 'node:crypto';
import { initParameters, parameterCount } from '@meshtrain/model';
import { CliError, type Command } from '../command.ts';
import { writeCheckpoint } from '../fsio/checkpoint.ts';
import { intFlag, parseFlags, presetFlag } from '../options/index.ts';

const command: Command = {
  summary: 'write a freshly initialised model (seeded, HF Llama safetensors + config.json)',
  usage:
    '--preset micro|tiny|20m|125m|1b --out DIR [--seed S] [--dtype f32|bf16]\n\n' +
    '  --preset P    model shape (packages/model/src/config.ts)\n' +
    '  --seed S      init seed, a non-negative integer (default 0); same seed → same bytes everywhere\n' +
    '  --out DIR     output directory (created); writes DIR/model.safetensors and DIR/config.json\n' +
    '  --dtype D     storage type of the weights: f32 (default) or bf16',
  async run(argv) {
    const { values } = parseFlags(argv, {
      preset: { type: 'string' },
      seed: { type: 'string' },
      out: { type: 'string' },
      dtype: { type: 'string' },
    });
    const { name, config } = presetFlag(values.preset);
    if (!values.out) throw new CliError('--out DIR is required');
    const seed = intFlag('seed', values.seed, 0);
    const dtype = values.dtype ?? 'f32';
    if (dtype !== 'f32' && dtype !== 'bf16') throw new CliError(`--dtype: f32 or bf16, got '${dtype}'`);
    const started = performance.now();
    const params = initParameters(config, seed);
    const written = await writeCheckpoint(values.out, config, params, {
      dtype: dtype === 'bf16' ? 'BF16' : 'F32',
      metadata: { meshtrain_preset: name, meshtrain_seed: String(seed) },
    });
    const { readFile } = await import('node:fs/promises');
    const sha = createHash('sha256')
      .update(await readFile(written.weightsPath))
      .digest('hex');
    console.log(
      `${name}: ${parameterCount(config).toLocaleString('en-US')} parameters, seed ${seed} → ${written.weightsPath} ` +
        `(${(written.bytes / 1e6).toFixed(2)} MB, sha256 ${sha.slice(0, 16)}…) and ${written.configPath} ` +
        `in ${((performance.now() - started) / 1000).toFixed(2)}s`,
    );
    return 0;
  },
};

export default command;
