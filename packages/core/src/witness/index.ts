export * from './bloom-data.ts';
export * from './errors.ts';
export * from './bloom.ts';
export * from './quorum.ts';
export * from './health.ts';
