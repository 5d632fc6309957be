export * from '../state/coordinator-config.ts';
export * from './config-check.ts';
export * from '../state/coordinator-state.ts';
export * from './events.ts';
export * from './errors.ts';
export * from './seed.ts';
export { MAX_STRIKES } from './membership.ts';
export { loadAttestation, roundAttestations } from './stored-attestation.ts';
export * from './queries.ts';
export * from './create.ts';
export * from './tick.ts';
export { retryQueueBound, unattestedBatches } from './retries.ts';
export { unhealthyTrainers } from './witnessing.ts';
export {
  CONFIRMING_STRIKES,
  STRIKE_WINDOW,
  verificationTasks,
  VERIFIERS_PER_RESULT,
  type VerificationTask,
} from './verification.ts';
export type { AdmittedResult } from './results.ts';
export {
  acceptedSlots,
  aliveFromEvidence,
  aliveSlots,
  admittedSlots,
  applyRoundOutcome,
  judgeRound,
  sameOutcome,
  type RoundOutcome,
} from './round-outcome.ts';
export {
  anchored,
  hasRecord,
  isTrusted,
  MAX_TRUSTED_VERIFIERS,
  PROBATION_SHARE_DIVISOR,
  QUALIFYING_PASSES,
  STRUCK_SAMPLING_FACTOR,
  TRUST_WINDOW,
  trustWarning,
} from './trust.ts';
