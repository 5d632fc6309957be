export * from './config.ts';
export * from './checkpoint/index.ts';
export * from './tokenizer/index.ts';
export * from './data/index.ts';
export * from './init.ts';
export * from './optim/index.ts';
export { buildTrainStep, type BuiltGraph, type GraphOptions } from './train-step.ts';
export { buildInference } from './inference.ts';
export type { TensorSpec } from './train-step.ts';
