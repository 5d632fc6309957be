import type { AbortOptions, Stream } from '@libp2p/interface';
import { TimeoutError, TruncatedError } from './errors.ts';

/**
 * Byte-level helpers over libp2p 3 streams. libp2p 3 streams are message streams: `send()` returns false when
 * the muxer's buffer is full and the writer must wait for `onDrain()`, and reading yields chunks of whatever
 * size the transport delivered. Our protocols need exact-length reads and bounded writes, so these helpers do
 * the framing; they never interpret the bytes.
 */

/** Size of the slices we hand to `send()`: big enough to keep yamux busy, small enough to interleave streams. */
export const WRITE_CHUNK_BYTES = 64 * 1024;

/** Sends all of `bytes`, waiting for drain whenever the stream asks us to. */
export async function writeAll(stream: Stream, bytes: Uint8Array, options?: AbortOptions): Promise<void> {
  for (let offset = 0; offset < bytes.length; offset += WRITE_CHUNK_BYTES) {
    const slice = bytes.subarray(offset, Math.min(offset + WRITE_CHUNK_BYTES, bytes.length));
    if (!stream.send(slice)) await stream.onDrain(options);
  }
}

/**
 * Buffered exact-length reader over one stream's readable side.
 *
 * It listens to the stream's events from construction on instead of using the stream's async iterator:
 * that iterator only subscribes on its first `next()`, so a 'remoteCloseWrite' that arrives before then is
 * missed and the read never ends (seen with a peer that answers and closes before we start reading). Create
 * the reader right after opening the stream, before sending the request.
 */
export class StreamReader {
  private readonly stream: Stream;
  private readonly signal: AbortSignal | undefined;
  private readonly pending: Uint8Array[] = [];
  private error: Error | undefined;
  private wake: (() => void) | undefined;

  constructor(stream: Stream, signal?: AbortSignal) {
    this.stream = stream;
    this.signal = signal;
    const notify = (): void => {
      const w = this.wake;
      this.wake = undefined;
      w?.();
    };
    stream.addEventListener('message', (evt) => {
      const chunk = evt.data instanceof Uint8Array ? evt.data : evt.data.subarray();
      if (chunk.length > 0) this.pending.push(chunk);
      notify();
    });
    stream.addEventListener('remoteCloseWrite', notify);
    stream.addEventListener('close', (evt) => {
      if (evt.error !== undefined) this.error = evt.error;
      notify();
    });
    signal?.addEventListener('abort', notify, { once: true });
  }

  /** Reads exactly `n` bytes; throws TruncatedError if the stream ends or is reset first. */
  async readExact(n: number, what: string): Promise<Uint8Array> {
    const out = new Uint8Array(n);
    await this.readInto(out, what);
    return out;
  }

  /**
   * Fills `target` completely. `onBytes` reports progress as chunks land (used for large transfers).
   * The target is allocated by the caller after it has checked the announced length against its limit, so a
   * peer cannot make us buffer more than we agreed to.
   */
  async readInto(target: Uint8Array, what: string, onBytes?: (filled: number) => void): Promise<void> {
    let filled = 0;
    while (filled < target.length) {
      const head = this.pending[0];
      if (head === undefined) {
        let more: boolean;
        try {
          more = await this.waitForData();
        } catch (err) {
          throw new TruncatedError(what, filled, target.length, err);
        }
        if (!more) throw new TruncatedError(what, filled, target.length);
        continue;
      }
      const take = Math.min(head.length, target.length - filled);
      target.set(head.subarray(0, take), filled);
      filled += take;
      if (take === head.length) this.pending.shift();
      else this.pending[0] = head.subarray(take);
      onBytes?.(filled);
    }
  }

  /** Resolves true once a chunk is pending, false at a clean end of stream; throws on reset/abort. */
  private async waitForData(): Promise<boolean> {
    while (this.pending.length === 0) {
      if (this.signal?.aborted === true) throw toAbortError(this.signal.reason);
      if (this.error !== undefined) throw this.error;
      const remoteDone = this.stream.remoteWriteStatus === 'closed' || this.stream.status !== 'open';
      // Data the stream buffered before we listened is re-dispatched to us in a microtask; wait for it.
      if (remoteDone && this.stream.readBufferLength === 0) return false;
      await new Promise<void>((resolve) => {
        // The timer covers the buffered-data dispatch and any state change that emits no event.
        const timer = setTimeout(done, remoteDone ? 0 : 1000);
        function done(): void {
          clearTimeout(timer);
          resolve();
        }
        this.wake = done;
      });
    }
    return true;
  }
}

/**
 * A deadline for one request. When it fires, the stream (registered with `attach`) is aborted so that any
 * pending read or drain wakes up; `rethrow` then turns the resulting stream error into a TimeoutError so the
 * caller sees why it failed rather than a generic reset.
 */
export class Deadline {
  readonly signal: AbortSignal;
  private readonly controller = new AbortController();
  private readonly timer: ReturnType<typeof setTimeout>;
  private stream: Stream | undefined;
  private readonly what: string;
  private readonly ms: number;
  private readonly onParentAbort: () => void;
  private readonly parent: AbortSignal | undefined;

  constructor(what: string, ms: number, parent?: AbortSignal) {
    this.what = what;
    this.ms = ms;
    this.parent = parent;
    this.signal = this.controller.signal;
    this.timer = setTimeout(() => this.fire(new TimeoutError(what, ms)), ms);
    this.onParentAbort = () => this.fire(toAbortError(parent?.reason));
    if (parent?.aborted === true) this.onParentAbort();
    else parent?.addEventListener('abort', this.onParentAbort, { once: true });
  }

  attach(stream: Stream): void {
    this.stream = stream;
    if (this.signal.aborted) stream.abort(toAbortError(this.signal.reason));
  }

  /** If the deadline (or the caller's signal) fired, its reason explains the failure better than `err`. */
  rethrow(err: unknown): never {
    if (this.signal.aborted) throw toAbortError(this.signal.reason);
    throw err;
  }

  clear(): void {
    clearTimeout(this.timer);
    this.parent?.removeEventListener('abort', this.onParentAbort);
  }

  private fire(reason: Error): void {
    if (this.signal.aborted) return;
    this.controller.abort(reason);
    this.stream?.abort(reason);
    clearTimeout(this.timer);
  }

  toString(): string {
    return `${this.what} (${this.ms} ms)`;
  }
}

function toAbortError(reason: unknown): Error {
  if (reason instanceof Error) return reason;
  const err = new Error(typeof reason === 'string' ? reason : 'aborted');
  err.name = 'AbortError';
  return err;
}

export function u32(n: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n);
  return out;
}

export function readU32(bytes: Uint8Array, offset = 0): number {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(offset);
}

export function u64(n: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(n));
  return out;
}

/** Reads a u64; values past 2^53 come back as Infinity so that any size limit check rejects them. */
export function readU64(bytes: Uint8Array, offset = 0): number {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getBigUint64(offset);
  return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.POSITIVE_INFINITY : Number(v);
}
