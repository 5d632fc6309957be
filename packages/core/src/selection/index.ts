export * from './errors.ts';
export { seedToBigInt, bigIntToSeed } from './hex.ts';
export * from './swap-or-not.ts';
export * from './committee.ts';
export * from './data-assignment.ts';
export * from './batch-size.ts';
export * from './inner-batches.ts';
