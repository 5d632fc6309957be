// How the client tells failures apart: by the code a refusal carries, never by its message text.

/** The client's parameters can no longer be trusted: stop contributing, rejoin, load the next checkpoint. */
export class ResyncNeeded extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ResyncNeeded';
  }
}

/**
 * The code of a refusal: the relay's ControlError code (RelayRefusal), core's coordinator error code
 * (CoordinatorError, what LocalHub throws), or any error with a string `code`; undefined for other errors.
 */
export function refusalCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const code = (err as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/** The relay's reply to a parameter hash that differs from the epoch's majority (PROTOCOL.md error codes). */
export const PARAM_HASH_MISMATCH = 'param_hash_mismatch';

/** An error's message, for events and logs, whatever was thrown. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
