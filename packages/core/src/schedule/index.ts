export * from './lr.ts';
export * from './cold-start.ts';
