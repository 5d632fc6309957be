// The p2p package's named defaults: what the code falls back to when an option is left out. Each number is
// written here once.

/** Bytes a MemoryBlobStore keeps before it evicts the oldest blobs. */
export const DEFAULT_BLOB_STORE_BYTES = 256 * 1024 * 1024;
/** Largest blob one fetch accepts. */
export const DEFAULT_MAX_BLOB_BYTES = 64 * 1024 * 1024;
/** Largest checkpoint (all pieces together) one fetch accepts. */
export const DEFAULT_MAX_CHECKPOINT_BYTES = 4 * 1024 * 1024 * 1024;
/** How long a whole blob or checkpoint fetch may take. */
export const DEFAULT_FETCH_TIMEOUT_MS = 30_000;
/** How long one request to one peer may take before the next peer is tried. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;
/** Piece requests in flight to one peer during a checkpoint fetch. */
export const DEFAULT_PIECE_CONCURRENCY_PER_PEER = 2;
/** Failed piece requests after which a peer is dropped from a checkpoint fetch. */
export const DEFAULT_MAX_PEER_FAILURES = 3;

/** Direct links a node keeps open besides the relay circuit. */
export const DEFAULT_DIRECT_MAX_PEERS = 32;
/** Direct-link dials in flight at once. */
export const DEFAULT_DIRECT_MAX_DIALS = 2;
/** How long a node waits for the other side to dial first (the lower id yields). */
export const DEFAULT_DIRECT_YIELD_MS = 5_000;
/** First wait after a failed direct dial; it doubles up to DEFAULT_DIRECT_MAX_BACKOFF_MS. */
export const DEFAULT_DIRECT_BACKOFF_MS = 30_000;
export const DEFAULT_DIRECT_MAX_BACKOFF_MS = 10 * 60_000;
/** Dial attempts per direct-link try. */
export const DEFAULT_DIRECT_ATTEMPTS = 2;
/** How long one dial attempt may take. */
export const DEFAULT_DIAL_ATTEMPT_TIMEOUT_MS = 10_000;
/** How long connecting to the relays' libp2p addresses may take before the peer starts without them. */
export const DEFAULT_RELAY_DIAL_TIMEOUT_MS = 10_000;
/** Period of the direct-link scheduler. */
export const DEFAULT_DIRECT_INTERVAL_MS = 1_000;

/** libp2p connection manager limits of a node. */
export const DEFAULT_MAX_CONNECTIONS = 1024;
export const DEFAULT_INBOUND_CONNECTION_THRESHOLD = 1000;
export const DEFAULT_MAX_INCOMING_PENDING_CONNECTIONS = 256;
/** Circuit-relay reservations a relaying node grants at once. */
export const DEFAULT_MAX_RESERVATIONS = 512;
/** How long one relayed circuit may stay open. */
export const DEFAULT_RELAY_DURATION_LIMIT_MS = 30 * 60 * 1000;
