export * from './shards.ts';
export * from './brown.ts';
export * from './split.ts';
export * from './manifest.ts';
export * from './sample-order.ts';
