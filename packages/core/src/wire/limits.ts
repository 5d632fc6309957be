// Decode limits. The relay and each peer pass their own; decoders check every count against them and
// against the bytes actually present before allocating anything sized by that count.
export interface WireLimits {
  /** Largest frame accepted, in bytes (checked before any parsing). */
  readonly maxFrameBytes: number;
  /** Most tensors in one training result. */
  readonly maxTensors: number;
  /** Most sparse entries (indices, summed over all tensors) in one training result. */
  readonly maxElements: number;
  /** Largest UTF-8 string field (ids, reasons, error messages), in bytes. */
  readonly maxStringBytes: number;
  /** Most clients in a coordinator-state broadcast, most reports in a health check, most bits in an attestation. */
  readonly maxClients: number;
}

export const DEFAULT_WIRE_LIMITS: WireLimits = {
  // A 1B-parameter result at top-8 1-bit is ~4.2 MB (docs/protocol.md "Result sizes"); 64 MiB leaves room for
  // larger models and unquantised values while still bounding what one frame can make us hold.
  maxFrameBytes: 64 * 1024 * 1024,
  maxTensors: 4096,
  maxElements: 32 * 1024 * 1024,
  maxStringBytes: 4096,
  // Psyche caps a run at 256 clients; we target 10,000 and leave an order of magnitude of headroom.
  maxClients: 131_072,
};

/** Fill unspecified limits from the defaults. */
export function wireLimits(overrides: Partial<WireLimits> = {}): WireLimits {
  return { ...DEFAULT_WIRE_LIMITS, ...overrides };
}

/** Fixed protocol caps (not tunable: they are part of the format). */
export const RUN_ID_MAX_BYTES = 64;
export const MAX_RANK = 8;
