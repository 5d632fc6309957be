export * from './lr.ts';
export * from './cold-start.ts';
export * from './inner-steps.ts';
