import { blobAddress, toHex } from './hash.ts';
import { InvalidArgumentError, TooLargeError } from './errors.ts';
import { DEFAULT_BLOB_STORE_BYTES } from './defaults.ts';

/**
 * Where the blob service reads what it serves. Addresses are SHA-256 of the bytes (see hash.ts). Methods
 * may be async so that the relay can back the store with disk or SQLite; the in-memory LRU below is the
 * default for peers.
 */
export interface BlobStore {
  /** The bytes stored under `address`, or undefined. Implementations must not return other bytes. */
  get(address: Uint8Array): Uint8Array | undefined | Promise<Uint8Array | undefined>;
  has(address: Uint8Array): boolean | Promise<boolean>;
  /** Stores `bytes` under SHA-256(bytes) and returns that address. */
  put(bytes: Uint8Array): Uint8Array | Promise<Uint8Array>;
  delete(address: Uint8Array): void | Promise<void>;
}

export interface MemoryBlobStoreOptions {
  /** Total bytes kept; least recently used blobs are evicted beyond it. Default 256 MiB. */
  maxBytes?: number;
  /** Largest single blob accepted; default `maxBytes`. */
  maxBlobBytes?: number;
}

/**
 * In-memory LRU with a byte budget. A training round produces a handful of results of kilobytes to a few
 * MiB that peers want for one or two rounds, so a recency bound is the right eviction rule. The store keeps
 * references to the caller's arrays: callers must not mutate bytes after `put`.
 */
export class MemoryBlobStore implements BlobStore {
  readonly maxBytes: number;
  readonly maxBlobBytes: number;
  // Map iteration order is insertion order; re-inserting on access makes the first entry the LRU one.
  private readonly entries = new Map<string, Uint8Array>();
  private used = 0;

  constructor(options: MemoryBlobStoreOptions = {}) {
    this.maxBytes = options.maxBytes ?? DEFAULT_BLOB_STORE_BYTES;
    this.maxBlobBytes = options.maxBlobBytes ?? this.maxBytes;
    if (!(this.maxBytes > 0) || !(this.maxBlobBytes > 0)) {
      throw new InvalidArgumentError('MemoryBlobStore limits must be positive');
    }
  }

  get usedBytes(): number {
    return this.used;
  }

  get size(): number {
    return this.entries.size;
  }

  get(address: Uint8Array): Uint8Array | undefined {
    const key = toHex(address);
    const bytes = this.entries.get(key);
    if (bytes !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, bytes);
    }
    return bytes;
  }

  has(address: Uint8Array): boolean {
    return this.entries.has(toHex(address));
  }

  put(bytes: Uint8Array): Uint8Array {
    if (bytes.length > this.maxBlobBytes) throw new TooLargeError('blob', bytes.length, this.maxBlobBytes);
    const address = blobAddress(bytes);
    const key = toHex(address);
    const old = this.entries.get(key);
    if (old !== undefined) {
      this.entries.delete(key);
      this.used -= old.length;
    }
    this.entries.set(key, bytes);
    this.used += bytes.length;
    this.evict();
    return address;
  }

  delete(address: Uint8Array): void {
    const key = toHex(address);
    const old = this.entries.get(key);
    if (old === undefined) return;
    this.entries.delete(key);
    this.used -= old.length;
  }

  private evict(): void {
    for (const [key, bytes] of this.entries) {
      if (this.used <= this.maxBytes) break;
      this.entries.delete(key);
      this.used -= bytes.length;
    }
  }
}
