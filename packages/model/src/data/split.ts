// Held-out split by document: a document is wholly in train or wholly in validation, so validation loss
// measures generalisation to unseen text rather than to unseen offsets of seen text.
import { fnv1a64 } from '../init.ts';

/**
 * The ids of the held-out documents: the round(fraction·n) documents with the smallest
 * FNV-1a-64(`split:<seed>:<id>`) (at least one when fraction > 0 and n ≥ 2, never all of them). Depends
 * only on the set of ids, not their order, so adding files elsewhere does not reshuffle an existing split.
 */
export function heldOutDocuments(ids: readonly string[], fraction: number, seed = 0): Set<string> {
  if (!(fraction >= 0 && fraction < 1))
    throw new RangeError(`val fraction must be in [0, 1), got ${fraction}`);
  const unique = [...new Set(ids)];
  let k = Math.round(fraction * unique.length);
  if (fraction > 0 && unique.length >= 2) k = Math.max(k, 1);
  k = Math.min(k, Math.max(0, unique.length - 1));
  const ranked = unique
    .map((id) => ({ id, h: fnv1a64(`split:${seed}:${id}`) }))
    .sort((a, b) => (a.h < b.h ? -1 : a.h > b.h ? 1 : a.id < b.id ? -1 : 1));
  return new Set(ranked.slice(0, k).map((r) => r.id));
}
