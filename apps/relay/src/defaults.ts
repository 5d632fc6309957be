// The relay's named defaults: what the code falls back to when an option is left out, and what the command
// line's usage text prints. Each number is written here once.

/** Interval of relay.db's WAL maintenance thread (store/wal-maintenance.ts). */
export const WAL_PASS_MS = 1000;
/** Bytes the WAL file keeps on disk once checkpointed (SQLite's journal_size_limit). */
export const WAL_JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024;
