// A typed refusal: why core's protocol rules turned a (decoded, possibly signed) message away. The relay
// sends `code` back as its ControlError code, the in-process hub throws it, clients match on it. Returned,
// never thrown, by the rule functions (like the coordinator's CoordinatorError), so a shell cannot forget to
// handle one.
export type RefusalCode =
  /** The message names another run than the connection's. */
  | 'wrong_run'
  /** A signature, commitment or claimed identity that does not verify. */
  | 'bad_signature'
  /** No stored round has the result's step. */
  | 'unknown_round'
  /** The round exists but takes no more results (only the open round and the one before it do). */
  | 'round_closed'
  /** The sender is not the assignee of that batch in that round. */
  | 'not_assignee'
  /** The result does not fit the run's model and optimizer (tensor set, shapes, k, value kind, indices). */
  | 'bad_result'
  /** A second, different result for one (step, batch, sender): the sender is ejected. */
  | 'equivocation'
  /** An announce for a result this sender has not submitted. */
  | 'unknown_result'
  /** An announce whose step, batch or size differs from the submitted result it names. */
  | 'announce_mismatch'
  /** A health report naming a client index outside the epoch. */
  | 'bad_report'
  /** A message for an epoch or step that is over (or not reached); harmless, just late or early. */
  | 'stale'
  /** The sender holds no slot this message needs (not a client of the epoch, not a voter). */
  | 'not_a_client'
  /** The phase does not take this message now. */
  | 'wrong_phase'
  /** A Join without the proof of work its challenge asked for. */
  | 'insufficient_work'
  /** The sender's parameters differ from its epoch's agreed hash: its replica diverged, it must re-sync. */
  | 'param_hash_mismatch';

export class ProtocolRefusal extends Error {
  readonly code: RefusalCode;
  /**
   * True when only a faulty or hostile sender produces this message (malformed, wrong signature, not its
   * batch): shells count it toward their bad-frame limits. False for messages an honest client can send
   * late or twice.
   */
  readonly bad: boolean;
  constructor(code: RefusalCode, message: string, bad = true) {
    super(message);
    this.name = 'ProtocolRefusal';
    this.code = code;
    this.bad = bad;
  }
}

/** The refusal code carried by any error (ProtocolRefusal, CoordinatorError, a relay's refusal), if any. */
export function refusalCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}
