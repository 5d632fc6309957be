export * from './config.ts';
export * from './checkpoint/index.ts';
export * from './tokenizer/index.ts';
export * from './data/index.ts';
export * from './init.ts';
export * from './optim/index.ts';
