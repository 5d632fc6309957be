// How a session refuses a frame: the error code and message it replies with, and whether the refusal counts
// toward the bad-frames-in-a-row limit.
import { ProtocolRefusal } from '@meshtrain/core';

/** A refusal the session replies with; `bad` ones count toward the bad-frames-in-a-row limit. */
export class Refusal extends Error {
  readonly code: string;
  readonly bad: boolean;
  constructor(code: string, message: string, bad = true) {
    super(message);
    this.code = code;
    this.bad = bad;
  }
}

/** Core's answer, or its refusal thrown as the session's. */
export function must<T>(answer: T | ProtocolRefusal): T {
  if (answer instanceof ProtocolRefusal) throw new Refusal(answer.code, answer.message, answer.bad);
  return answer;
}
