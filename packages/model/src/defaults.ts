// The model package's named defaults: what the code falls back to when an option is left out. Each number is
// written here once; other packages (distro's AdamW) import them.
import type { TokenBytes } from './data/shards.ts';

/** AdamW's epsilon in the denominator (PyTorch's default). */
export const DEFAULT_ADAMW_EPS = 1e-8;
/** Bytes per token in a prepared shard: 2 fits vocabularies up to 65 536 ids. */
export const DEFAULT_TOKEN_BYTES: TokenBytes = 2;
/** Tokens per shard file when a data set is prepared. */
export const DEFAULT_SHARD_TOKENS = 2 ** 24;
