// The relay's named defaults: what the code falls back to when an option is left out, and what the command
// line's usage text prints. Each number is written here once.
import { parameterCount, PRESETS } from '@meshtrain/model';

/** Where `meshtrain-relay run` keeps relay.db, checkpoints and data sets. */
export const DEFAULT_DATA_DIR = 'relay-data';
export const DEFAULT_PORT = 8080;
export const DEFAULT_HOST = '127.0.0.1';

/** Coordinator tick period (Psyche's centralized server: 500 ms). */
export const DEFAULT_TICK_MS = 500;
/** How long a dropped connection keeps its slot before it becomes a `leave`. */
export const DEFAULT_GRACE_MS = 10_000;
/** How long a new connection may take to send its Join (an honest client answers at once). */
export const DEFAULT_JOIN_TIMEOUT_MS = 10_000;
/** Least time between two state broadcasts (StateDelta frames) of one run. */
export const DEFAULT_SNAPSHOT_INTERVAL_MS = 100;
/** Frames one connection may send per second on average (bursts of twice that). */
export const DEFAULT_MAX_FRAMES_PER_SECOND = 100;

/** Bytes a connection may send before its Join is acknowledged (a Join is ~300 bytes; a few retries fit). */
export const DEFAULT_PRE_JOIN_MAX_BYTES = 16 * 1024;
/** Connections that have not joined yet, all addresses together. */
export const DEFAULT_MAX_UNJOINED = 2048;
/**
 * Connections that have not joined yet from one address. Behind a reverse proxy every client shares the
 * proxy's address, so this is generous: a reconnect wave after a restart is many unjoined clients at once
 * (and a refused client retries with backoff).
 */
export const DEFAULT_MAX_UNJOINED_PER_ADDRESS = 256;

/**
 * Largest model (parameters) a run may train unless the operator raises it: the 125m preset, the biggest
 * this relay serves (its f32 checkpoint is ~500 MB, kept a few times on disk and built in memory when the run
 * is seeded). Larger presets need a relay sized for them (--max-model-params).
 */
export const DEFAULT_MAX_MODEL_PARAMS = parameterCount(PRESETS['125m']);
/**
 * Live (not Finished) runs one key may have created over the admin API, and all of them together. Keys cost
 * nothing to make, so only the total truly bounds an open relay; --run-creators closes it.
 */
export const DEFAULT_MAX_RUNS_PER_CREATOR = 4;
export const DEFAULT_MAX_RUNS = 32;

/**
 * Defaults of an open relay started from the command line: a join to a permissionless run costs about 2^20
 * SHA-256 (a second or two of one core), and one address brings at most 16 identities into a run
 * (docs/protocol.md "Threat model"). A relay started in-process asks for no work and sets no per-address
 * limit unless told.
 */
export const DEFAULT_JOIN_POW_BITS = 20;
export const DEFAULT_MAX_IDENTITIES_PER_ADDRESS = 16;

/** Model checkpoints kept per run (the newest; older step directories are deleted). */
export const DEFAULT_CHECKPOINT_KEEP = 3;
/** Cap per samples request of the data provider: 1024 samples of the tiny preset are 0.5 MiB. */
export const DEFAULT_MAX_SAMPLES_PER_REQUEST = 1024;
/** Cap on one samples answer, whatever the sequence length. */
export const DEFAULT_MAX_SAMPLE_BYTES = 64 * 1024 * 1024;
/** libp2p WebSocket connections bridged at once (libp2p itself caps connections at 1024 by default). */
export const DEFAULT_MAX_BRIDGED = 2048;

/** Interval of relay.db's WAL maintenance thread (store/wal-maintenance.ts). */
export const WAL_PASS_MS = 1000;
/** Bytes the WAL file keeps on disk once checkpointed (SQLite's journal_size_limit). */
export const WAL_JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024;
