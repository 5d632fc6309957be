export type WitnessErrorCode = 'BadAttestation' | 'BadArgument';

/** A malformed attestation or sizing argument. Messages say which field is wrong and what was expected. */
export class WitnessError extends Error {
  readonly code: WitnessErrorCode;
  constructor(code: WitnessErrorCode, message: string) {
    super(message);
    this.name = 'WitnessError';
    this.code = code;
  }
}
