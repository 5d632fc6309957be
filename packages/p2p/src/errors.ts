/**
 * Typed errors of packages/p2p. Every failure a caller may want to react to differently has its own class,
 * so that `instanceof` (or `code`) can tell "this peer lied" from "this peer is gone" from "nobody has it".
 * Messages say what happened and, where there is one, what to do about it.
 */

export type P2PErrorCode =
  | 'invalid-argument'
  | 'dial-failed'
  | 'relay-unreachable'
  | 'timeout'
  | 'protocol'
  | 'not-found'
  | 'too-large'
  | 'truncated'
  | 'hash-mismatch'
  | 'fetch-failed'
  | 'announcement-too-large'
  | 'manifest-invalid'
  | 'checkpoint-download-failed';

/** Base class: every error thrown on purpose by this package is a P2PError. */
export class P2PError extends Error {
  readonly code: P2PErrorCode;
  constructor(code: P2PErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'P2PError';
    this.code = code;
  }
}

/** A caller passed something unusable (wrong address length, bad limits). */
export class InvalidArgumentError extends P2PError {
  constructor(message: string) {
    super('invalid-argument', message);
    this.name = 'InvalidArgumentError';
  }
}

/**
 * A dial failed. `cause` holds what libp2p threw; on Node 22+ a failed WebSocket dial rejects with a DOM
 * `ErrorEvent` rather than an Error, so the cause is kept as `unknown` and summarised into the message.
 */
export class DialError extends P2PError {
  readonly target: string;
  constructor(target: string, cause: unknown) {
    super('dial-failed', `could not dial ${target}: ${describeCause(cause)}`, { cause });
    this.name = 'DialError';
    this.target = target;
  }
}

/** None of the configured relays could be reached; check the relay address and that the relay is running. */
export class RelayUnreachableError extends P2PError {
  readonly failures: readonly DialError[];
  constructor(failures: readonly DialError[]) {
    super(
      'relay-unreachable',
      `no relay reachable (${failures.length} tried): ${failures.map((f) => f.message).join('; ')}. ` +
        'Check the relay address (/ip4|dns/.../tcp/PORT/ws[s]/p2p/RELAY_ID) and that the relay is running.',
    );
    this.name = 'RelayUnreachableError';
    this.failures = failures;
  }
}

/** A request did not complete within its deadline. */
export class TimeoutError extends P2PError {
  constructor(what: string, ms: number) {
    super('timeout', `${what} timed out after ${ms} ms`);
    this.name = 'TimeoutError';
  }
}

/** The remote spoke our protocol wrongly (bad status byte, trailing bytes, impossible lengths). */
export class ProtocolError extends P2PError {
  constructor(message: string) {
    super('protocol', message);
    this.name = 'ProtocolError';
  }
}

/** The remote does not hold the requested blob / checkpoint / piece. */
export class NotFoundError extends P2PError {
  constructor(what: string) {
    super('not-found', `${what} not found on the remote peer`);
    this.name = 'NotFoundError';
  }
}

/** The remote announced more bytes than the caller accepts; the transfer was aborted before reading them. */
export class TooLargeError extends P2PError {
  readonly announcedBytes: number;
  readonly limitBytes: number;
  constructor(what: string, announcedBytes: number, limitBytes: number) {
    super(
      'too-large',
      `${what} is ${announcedBytes} bytes, over the limit of ${limitBytes} bytes; raise maxBytes if this size is expected`,
    );
    this.name = 'TooLargeError';
    this.announcedBytes = announcedBytes;
    this.limitBytes = limitBytes;
  }
}

/** The stream ended (or was reset) before the announced number of bytes arrived. */
export class TruncatedError extends P2PError {
  readonly receivedBytes: number;
  readonly expectedBytes: number;
  constructor(what: string, receivedBytes: number, expectedBytes: number, cause?: unknown) {
    super('truncated', `${what} truncated: got ${receivedBytes} of ${expectedBytes} bytes`, { cause });
    this.name = 'TruncatedError';
    this.receivedBytes = receivedBytes;
    this.expectedBytes = expectedBytes;
  }
}

/** The bytes received do not hash to the address they were requested by: the peer served wrong content. */
export class HashMismatchError extends P2PError {
  readonly expected: string;
  readonly actual: string;
  constructor(what: string, expectedHex: string, actualHex: string) {
    super(
      'hash-mismatch',
      `${what}: SHA-256 is ${actualHex}, expected ${expectedHex}; the peer served wrong bytes`,
    );
    this.name = 'HashMismatchError';
    this.expected = expectedHex;
    this.actual = actualHex;
  }
}

/** One failed attempt against one candidate peer. */
export interface PeerFailure {
  /** The peer (id string) or multiaddr that was tried. */
  readonly peer: string;
  readonly error: Error;
}

/** Every candidate failed; `failures` says why each one did. */
export class FetchFailedError extends P2PError {
  readonly failures: readonly PeerFailure[];
  constructor(what: string, failures: readonly PeerFailure[]) {
    super(
      'fetch-failed',
      failures.length === 0
        ? `${what}: no candidate peers given`
        : `${what}: all ${failures.length} candidates failed: ` +
            failures.map((f) => `${f.peer}: ${f.error.message}`).join('; '),
    );
    this.name = 'FetchFailedError';
    this.failures = failures;
  }
}

/** Gossipsub is for announcements only (it drops messages near 4 MiB); put payloads in the blob store. */
export class AnnouncementTooLargeError extends P2PError {
  constructor(bytes: number, limit: number) {
    super(
      'announcement-too-large',
      `announcement of ${bytes} bytes exceeds ${limit} bytes; announce an address and serve the payload as a blob`,
    );
    this.name = 'AnnouncementTooLargeError';
  }
}

/** A checkpoint manifest that does not parse or is inconsistent with itself. */
export class ManifestError extends P2PError {
  constructor(message: string) {
    super('manifest-invalid', message);
    this.name = 'ManifestError';
  }
}

/** A checkpoint download could not be completed from any of the peers. */
export class CheckpointDownloadError extends P2PError {
  readonly failures: readonly PeerFailure[];
  readonly piecesMissing: number;
  constructor(message: string, failures: readonly PeerFailure[], piecesMissing: number) {
    super('checkpoint-download-failed', message);
    this.name = 'CheckpointDownloadError';
    this.failures = failures;
    this.piecesMissing = piecesMissing;
  }
}

/** Turns anything thrown (Error, ErrorEvent, string) into readable text. */
export function describeCause(cause: unknown): string {
  if (cause instanceof Error) return cause.message || cause.name;
  if (typeof cause === 'object' && cause !== null) {
    const c = cause as { message?: unknown; type?: unknown; error?: unknown };
    if (c.error instanceof Error) return c.error.message;
    if (typeof c.message === 'string' && c.message !== '') return c.message;
    if (typeof c.type === 'string') return `${c.type} event`;
  }
  return String(cause);
}

/** Normalises a thrown value into an Error so failure lists are uniform. */
export function toError(cause: unknown): Error {
  return cause instanceof Error ? cause : new Error(describeCause(cause));
}
