// What the relay's parts share: the session a run's broadcasts go to, the relay's log, and the error its
// admin and API routes turn into an HTTP status.
import type { ConfigIssue } from '@meshtrain/core';

/** What a live coordinator session exposes to the relay (implemented in session.ts). */
export interface SessionHandle {
  readonly identity: string;
  /** The session follows the run as a light replica (LightDelta frames and summary snapshots). */
  readonly light?: boolean;
  /** Sends raw frame bytes; never throws (a dead socket just drops them). */
  send(frame: Uint8Array): void;
  /** Closes the transport with a WebSocket close code. */
  close(code: number, reason: string): void;
}

export interface RelayLog {
  info(msg: string): void;
  warn(msg: string): void;
}

export const quietLog: RelayLog = { info: () => {}, warn: () => {} };

/** An admin/API failure with the HTTP status and the JSON error code the route returns. */
export class RelayError extends Error {
  readonly status: 400 | 401 | 403 | 404 | 409 | 413 | 429 | 500;
  readonly code: string;
  readonly issues: readonly ConfigIssue[] | undefined;
  constructor(status: RelayError['status'], code: string, message: string, issues?: readonly ConfigIssue[]) {
    super(message);
    this.name = 'RelayError';
    this.status = status;
    this.code = code;
    this.issues = issues;
  }
}

/** Grantee meaning "anyone" (docs/protocol.md "Run permissions": the all-zero public key). */
export const PERMISSIONLESS = '0'.repeat(64);
