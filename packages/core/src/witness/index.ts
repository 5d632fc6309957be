export * from './errors.ts';
export * from './attestation.ts';
export * from './quorum.ts';
export * from './health.ts';
