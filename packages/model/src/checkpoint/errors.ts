export type CheckpointErrorCode =
  'config' | 'unsupported' | 'unknown-tensor' | 'missing-tensor' | 'shape-mismatch' | 'dtype';

/** A checkpoint whose tensors or config do not fit the model we build; `code` says what to fix. */
export class CheckpointError extends Error {
  readonly code: CheckpointErrorCode;
  constructor(code: CheckpointErrorCode, message: string) {
    super(message);
    this.name = 'CheckpointError';
    this.code = code;
  }
}
