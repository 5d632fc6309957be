// relay.db's admin request signatures accepted within their freshness window (replay protection).
import { num, type Row, type StoreDb } from './database.ts';

export const ADMIN_SIGNATURES_SCHEMA = `
-- Admin request signatures accepted within their freshness window: a replay is refused even after a restart.
CREATE TABLE IF NOT EXISTS admin_signatures (
  sig TEXT PRIMARY KEY,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS admin_signatures_expiry ON admin_signatures(expires_at);
`;

/**
 * Admin signatures remembered at once (each for its 5-minute window). Anyone can sign with a fresh key, so
 * beyond this many the relay refuses admin requests until old ones expire rather than grow the table.
 */
export const MAX_ADMIN_SIGNATURES = 100_000;

/** The admin_signatures table. */
export class AdminSignatureTable {
  private readonly db: StoreDb;

  constructor(db: StoreDb) {
    this.db = db;
  }

  /**
   * Remembers an accepted admin signature until `expiresAt` (unix ms). 'replay' when it is already
   * remembered, 'full' when MAX_ADMIN_SIGNATURES unexpired ones are; expired ones are forgotten first.
   */
  rememberAdminSignature(sig: string, expiresAt: number, now: number): 'ok' | 'replay' | 'full' {
    this.db.q('DELETE FROM admin_signatures WHERE expires_at < ?').run(now);
    if (this.db.q('SELECT 1 FROM admin_signatures WHERE sig = ?').get(sig) !== undefined) return 'replay';
    const n = num((this.db.q('SELECT COUNT(*) AS n FROM admin_signatures').get() as Row).n);
    if (n >= MAX_ADMIN_SIGNATURES) return 'full';
    this.db.q('INSERT INTO admin_signatures(sig, expires_at) VALUES (?, ?)').run(sig, expiresAt);
    return 'ok';
  }
}
