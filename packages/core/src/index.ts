// packages/core: the protocol, pure. No I/O, no clocks, no randomness not derived from inputs.
export * from './config/index.ts';
export * from './schedule/index.ts';
export * from './coordinator/index.ts';
export * from './selection/index.ts';
export * from './witness/index.ts';
export * from './wire/index.ts';
export * from './replica/index.ts';
export * from './crypto/index.ts';
export * from './protocol/index.ts';
