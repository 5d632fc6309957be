// How the client tells failures apart: by the code a refusal carries (core's refusalCode), never by its
// message text.

/** The client's parameters can no longer be trusted: stop contributing, rejoin, load the next checkpoint. */
export class ResyncNeeded extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ResyncNeeded';
  }
}

/** The relay's reply to a parameter hash that differs from the epoch's majority (PROTOCOL.md error codes). */
export const PARAM_HASH_MISMATCH = 'param_hash_mismatch';

/** An error's message, for events and logs, whatever was thrown. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
