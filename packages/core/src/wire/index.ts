// meshtrain's binary wire format: framing, every protocol message, commitments and signed envelopes.
export * from './errors.ts';
export * from './limits.ts';
export * from './codec.ts';
export * from './frame.ts';
export * from './common.ts';
export * from './distro-result.ts';
export * from './training-result.ts';
export * from './commitment.ts';
export * from './announce.ts';
export * from './witness.ts';
export * from './membership.ts';
export * from './challenge.ts';
export * from './state-snapshot.ts';
export * from './param-hash.ts';
export * from './coordinator-state.ts';
export * from './control.ts';
export * from './messages.ts';
