// The only error the wire codec throws. Decoders run on bytes from the network: whatever the input,
// callers get a WireError with a machine-readable code and a message naming the field, never a
// RangeError, TypeError or out-of-memory.
export type WireErrorCode =
  /** Input ended inside a field. */
  | 'truncated'
  /** The frame is larger than `maxFrameBytes`, or an integer exceeds its type's range. */
  | 'oversized'
  /** Frame does not start with "MT". */
  | 'bad_magic'
  /** Frame version is not one this codec speaks. */
  | 'bad_version'
  /** Message type byte is not assigned (or not the one the caller asked for). */
  | 'unknown_type'
  /** Fields contradict each other or break an invariant (non-canonical encodings included). */
  | 'inconsistent'
  /** Bytes remain after the message. */
  | 'trailing_bytes'
  /** A signature or commitment does not verify. */
  | 'bad_signature'
  /** A count or size is above a configured decode limit. */
  | 'limit';

export class WireError extends Error {
  readonly code: WireErrorCode;
  /** Dotted path of the field at fault, e.g. `tensors[2].indices[17]`. */
  readonly field: string;
  constructor(code: WireErrorCode, field: string, detail: string) {
    super(`${field}: ${detail}`);
    this.name = 'WireError';
    this.code = code;
    this.field = field;
  }
}
