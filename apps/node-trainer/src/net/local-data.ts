// DataSource over a prepared token-shard directory (`--data-shard`, prepare-data's format): sample i of the
// run is training sample i mod N of the shard, so every peer holding the same shard reads the same tokens.
import type { DataSource } from '@meshtrain/client';
import { loadDataset, type LoadedDataset } from '@meshtrain/model/node';

export async function localDataSource(
  dir: string,
  seqLen: number,
): Promise<DataSource & { dataset: LoadedDataset }> {
  const dataset = await loadDataset(dir, { seqLen });
  const n = dataset.train.index.sampleCount;
  if (n === 0) throw new Error(`${dir}: no training sample of ${seqLen + 1} tokens`);
  return {
    dataset,
    async samples(start, end) {
      const rows = Array.from({ length: end - start + 1 }, (_, i) => (start + i) % n);
      return dataset.train.batch(rows);
    },
  };
}
