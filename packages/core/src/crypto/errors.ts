// Typed failures of the crypto helpers. Verification never throws (it answers false); only malformed
// inputs that a caller controls (wrong key length, bad hex) do.
export type CryptoErrorCode = 'bad_length' | 'bad_hex';

export class CryptoError extends Error {
  readonly code: CryptoErrorCode;
  constructor(code: CryptoErrorCode, message: string) {
    super(message);
    this.name = 'CryptoError';
    this.code = code;
  }
}
