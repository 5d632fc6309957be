export type CheckpointErrorCode =
  'config' | 'unsupported' | 'unknown-tensor' | 'missing-tensor' | 'shape-mismatch' | 'dtype';

/** An error whose `code` names the rule a checkpoint or its file broke; the message says how. */
export class CodedError<C extends string> extends Error {
  readonly code: C;
  constructor(name: string, code: C, message: string) {
    super(message);
    this.name = name;
    this.code = code;
  }
}

/** A checkpoint whose tensors or config do not fit the model we build; `code` says what to fix. */
export class CheckpointError extends CodedError<CheckpointErrorCode> {
  constructor(code: CheckpointErrorCode, message: string) {
    super('CheckpointError', code, message);
  }
}
