// node-trainer prepare-data: text files → token shards + manifest.json (byte-level tokenizer), or the
// embedded Brown corpus with `--input brown` / `--dataset brown`.
import { ByteTokenizer, ManifestError, type DataManifest } from '@meshtrain/model';
import { DatasetError, prepareShards } from '@meshtrain/model/node';
import { CliError, type Command } from '../command.ts';
import { brownCacheDir, prepareBrown } from '../dataset/brown.ts';
import { collectInputFiles } from '../dataset/inputs.ts';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { floatFlag, intFlag, parseFlags } from '../options/index.ts';
import { Progress } from '../progress/index.ts';

function summary(dir: string, m: DataManifest, seconds: number): string {
  const s = m.splits;
  return (
    `${dir}: train ${s.train.tokens.toLocaleString('en-US')} tokens in ${s.train.shards.length} shard(s) ` +
    `(${s.train.documents} docs), val ${s.val.tokens.toLocaleString('en-US')} tokens in ${s.val.shards.length} ` +
    `shard(s) (${s.val.documents} docs), ${m.token_bytes}-byte tokens, ${seconds.toFixed(1)}s`
  );
}

const command: Command = {
  summary: 'tokenize text files (or the embedded Brown corpus) into token shards',
  usage:
    '--input <file|dir|brown>... [--out DIR] [--token-bytes 2|4] [--val-fraction F]\n\n' +
    '  --input X        a text file or a directory (read recursively; dot-files skipped); repeatable.\n' +
    '                   `brown` (or --dataset brown) prepares the embedded Brown corpus\n' +
    '  --out DIR        output directory (required for files; brown defaults to the cache,\n' +
    '                   $MESHTRAIN_CACHE_DIR or ~/.cache/meshtrain/data/brown-v1-u16)\n' +
    '  --token-bytes N  2 (u16, default) or 4 (u32) per token, little-endian\n' +
    '  --val-fraction F share of documents held out for validation (default 0.05)\n' +
    '  --shard-tokens N tokens per shard file (default 16777216)\n\n' +
    'Writes train-00000.bin…, val-00000.bin… and manifest.json (tokenizer, token_bytes, counts, sha256).',
  async run(argv) {
    const { values } = parseFlags(argv, {
      input: { type: 'string', multiple: true },
      dataset: { type: 'string' },
      out: { type: 'string' },
      'token-bytes': { type: 'string' },
      'val-fraction': { type: 'string' },
      'shard-tokens': { type: 'string' },
    });
    const tokenBytes = intFlag('token-bytes', values['token-bytes'], 2, 2);
    if (tokenBytes !== 2 && tokenBytes !== 4) throw new CliError(`--token-bytes: 2 or 4, got ${tokenBytes}`);
    const valFraction = floatFlag('val-fraction', values['val-fraction'], 0.05, (f) => f >= 0 && f < 1);
    const shardTokens = intFlag('shard-tokens', values['shard-tokens'], 2 ** 24, 1);
    const inputs = values.input ?? [];
    if (values.dataset !== undefined && values.dataset !== 'brown')
      throw new CliError(`--dataset: only 'brown' is embedded, got '${values.dataset}'`);
    const brown = values.dataset === 'brown' || (inputs.length === 1 && inputs[0] === 'brown');
    const started = performance.now();
    try {
      if (brown) {
        const out = values.out ?? brownCacheDir(tokenBytes);
        await prepareBrown(out, { tokenBytes, valFraction });
        const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as DataManifest;
        console.log(summary(out, manifest, (performance.now() - started) / 1000));
        return 0;
      }
      if (inputs.length === 0) throw new CliError('--input <file|dir> is required (or --dataset brown)');
      if (!values.out) throw new CliError('--out DIR is required');
      const files = await collectInputFiles(inputs);
      const total = files.reduce((n, f) => n + f.bytes, 0);
      const progress = new Progress('prepare-data', total, { format: (n) => `${(n / 1e6).toFixed(1)}MB` });
      const manifest = await prepareShards(
        files.map((f) => ({ id: f.id, bytes: f.bytes, load: () => readFile(f.path, 'utf8') })),
        values.out,
        {
          tokenizer: new ByteTokenizer(),
          tokenBytes,
          valFraction,
          shardTokens,
          source: inputs.join(' '),
          onProgress: (done) => progress.update(done),
        },
      );
      progress.finish(`${files.length} files`);
      console.log(summary(values.out, manifest, (performance.now() - started) / 1000));
      return 0;
    } catch (err) {
      if (err instanceof DatasetError || err instanceof ManifestError) throw new CliError(err.message);
      throw err;
    }
  },
};

export default command;
