// DataSource over a prepared token-shard directory (`--data-shard`, prepare-data's format): run sample id i reads
// training sample order.at(i) of the shard — i mod N in corpus order, or the seeded permutation of i's pass when
// the run's data location has `shuffle = { Seeded = … }` (@meshtrain/model's sample-order.ts, the relay's own
// mapping) — so every peer holding the same shard reads the same tokens as peers fed by the relay.
import type { DataSource } from '@meshtrain/client';
import type { DataLocation } from '@meshtrain/core';
import { corpusOrder, sampleOrderFor, type SampleOrder } from '@meshtrain/model';
import { loadDataset, type LoadedDataset } from '@meshtrain/model/node';

export async function localDataSource(
  dir: string,
  seqLen: number,
  /** The run's data location, for its order; absent: corpus order. */
  location?: DataLocation,
): Promise<DataSource & { dataset: LoadedDataset; order: SampleOrder }> {
  const dataset = await loadDataset(dir, { seqLen });
  const n = dataset.train.index.sampleCount;
  if (n === 0) throw new Error(`${dir}: no training sample of ${seqLen + 1} tokens`);
  const order = location === undefined ? corpusOrder(n) : sampleOrderFor(location, n);
  return {
    dataset,
    order,
    async samples(start, end) {
      const rows = Array.from({ length: end - start + 1 }, (_, i) => order.at(start + i));
      return dataset.train.batch(rows);
    },
  };
}
