export type CoordinatorErrorCode =
  | 'BadEvent'
  | 'WrongPhase'
  | 'UnknownClient'
  | 'NotHealthy'
  | 'AlreadyMember'
  | 'Ejected'
  | 'RunFull'
  | 'StaleRound'
  | 'BadProof'
  | 'NotAWitness'
  | 'DuplicateWitness'
  | 'BadAttestation'
  | 'TooEarly'
  | 'NotJudgeable'
  | 'ClientIsHealthy'
  | 'InvalidConfig'
  | 'RoundClosed'
  | 'NotAssignee'
  | 'DuplicateResult'
  | 'Equivocation'
  | 'DuplicateAccusation'
  | 'NotAVerifier'
  | 'NothingToVerify'
  | 'DuplicateVerdict'
  | 'MissingOutcome'
  | 'OutcomeMismatch';

/**
 * Why the coordinator refused an event. Returned in TickResult, never thrown: a refused event leaves the
 * protocol state as it was (only misbehaviour bookkeeping — strikes, ejection — may change).
 */
export class CoordinatorError extends Error {
  readonly code: CoordinatorErrorCode;
  constructor(code: CoordinatorErrorCode, message: string) {
    super(message);
    this.name = 'CoordinatorError';
    this.code = code;
  }
}
