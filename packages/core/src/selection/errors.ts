export type SelectionErrorCode = 'BadSeed' | 'BadArgument';

/** Thrown for malformed inputs to selection (bad seeds, out-of-range indices): a caller bug, not a protocol event. */
export class SelectionError extends Error {
  readonly code: SelectionErrorCode;
  constructor(code: SelectionErrorCode, message: string) {
    super(message);
    this.name = 'SelectionError';
    this.code = code;
  }
}
