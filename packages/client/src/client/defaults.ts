// The client's timings and retry budgets, in one place. Each says why it has its value; the protocol's own
// timeouts (round and phase lengths) come from the run config, not from here.

/**
 * How often the driver re-checks the newest state when no new one arrived. Witnesses wait for results that
 * arrive without a state change (the relay forwards them between snapshots); 200 ms is a small fraction of
 * the shortest round_witness_time (1 s) while costing nothing measurable when idle.
 */
export const POLL_INTERVAL_MS = 200;

/**
 * How long an accepted result may stay unobtainable (held → peers → relay, retried) before the client gives
 * up and re-syncs from a checkpoint. The relay stores every result it forwarded, so a result missing for
 * 10 s means the relay is unreachable or the result is gone; waiting longer would stall this client's
 * training past a round without making divergence less likely.
 */
export const FETCH_PATIENCE_MS = 10_000;

/** Pause between two tries of one accepted result: a relay round trip, so tries do not hammer it. */
export const FETCH_RETRY_DELAY_MS = 250;

/**
 * Background fetches started by an announce: tries, and the first pause, doubled after each failed try
 * (250, 500, 1000 ms). The payload usually lands within a round trip of the announce; if it does not, the
 * apply step's own fetch (FETCH_PATIENCE_MS) still gets it, so a short budget here loses nothing.
 */
export const ANNOUNCE_FETCH_ATTEMPTS = 4;
export const ANNOUNCE_FETCH_BACKOFF_MS = 250;

/**
 * Loading the checkpoint an epoch starts from, for a (re)joining client: retries after the first try, and
 * the pause between them (together 30 s). The epoch's uploader sends it at Cooldown and the relay keeps it
 * only once the epoch's majority hash exists, so a joiner that asks at Warmup may ask a little early.
 */
export const CHECKPOINT_LOAD_RETRIES = 60;
export const CHECKPOINT_RETRY_DELAY_MS = 500;

/**
 * Uploading this client's end-of-epoch checkpoint: tries, and the pause before try n+1 (n × 500 ms, 22.5 s
 * in all). The relay refuses an upload until a majority of the epoch's clients reported their hash, which
 * takes the slowest client's Cooldown; after that the other clients' uploads or peers serve joiners anyway.
 */
export const UPLOAD_ATTEMPTS = 10;
export const UPLOAD_BACKOFF_MS = 500;

/**
 * How long the epoch's r-th voter waits (r × this) before it uploads the checkpoint itself if the relay still
 * has none: longer than the designated uploader's encode-and-send of a small model plus its first retries,
 * short enough that joiners of the next epoch (who retry for 30 s) get parameters when it vanished.
 */
export const UPLOAD_STANDBY_MS = 8_000;

/**
 * The window the reported bandwidth averages over: several rounds (a round lasts a few to tens of seconds),
 * so one burst of result fetches does not make the figure jump, short enough to follow a changed network.
 */
export const BANDWIDTH_WINDOW_MS = 60_000;

/** Samples the bandwidth window keeps at most (one per witness report); bounds it whatever the round length. */
export const BANDWIDTH_MAX_SAMPLES = 64;
