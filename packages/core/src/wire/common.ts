// Small field groups used by several messages.
import { verify } from '../crypto/index.ts';
import type { ByteReader, ByteWriter } from './codec.ts';
import { WireError } from './errors.ts';
import { RUN_ID_MAX_BYTES } from './limits.ts';

/** Closed interval of sample indices [start, end], as Psyche's BatchId. */
export interface BatchInterval {
  start: number;
  end: number;
}

/** runId: string, 1..64 UTF-8 bytes (Psyche: 32). */
export function writeRunId(w: ByteWriter, runId: string, field = 'runId'): void {
  if (runId === '') throw new WireError('inconsistent', field, 'run id is empty');
  w.string(runId, RUN_ID_MAX_BYTES, field);
}

export function readRunId(r: ByteReader, field = 'runId'): string {
  const s = r.string(RUN_ID_MAX_BYTES, field);
  if (s === '') throw new WireError('inconsistent', field, 'run id is empty');
  return s;
}

/** batch: start varint ≤ 2^53−1 ‖ end varint, end ≥ start. */
export function writeBatch(w: ByteWriter, b: BatchInterval, field = 'batch'): void {
  if (typeof b !== 'object' || b === null) throw new WireError('inconsistent', field, 'not a batch interval');
  if (b.end < b.start) throw new WireError('inconsistent', field, `end ${b.end} < start ${b.start}`);
  w.u53(b.start, `${field}.start`);
  w.u53(b.end, `${field}.end`);
}

export function readBatch(r: ByteReader, field = 'batch'): BatchInterval {
  const start = r.u53(`${field}.start`);
  const end = r.u53(`${field}.end`);
  if (end < start) throw new WireError('inconsistent', field, `end ${end} < start ${start}`);
  return { start, end };
}

/** Throw 'truncated' early when `count` items of at least `minBytes` each cannot fit in what is left. */
export function needItems(r: ByteReader, count: number, minBytes: number, field: string): void {
  if (count * minBytes > r.remaining) {
    throw new WireError(
      'truncated',
      field,
      `${count} items need at least ${count * minBytes} bytes, ${r.remaining} left`,
    );
  }
}

/** Throw 'limit' when a count exceeds a configured maximum. */
export function checkCount(count: number, max: number, field: string, limitName: string): void {
  if (count > max) throw new WireError('limit', field, `count ${count} exceeds ${limitName} ${max}`);
}

/**
 * Throws WireError('bad_signature') unless `signer` signed the bytes `signedBytes` encodes. Fields that cannot
 * be encoded are a bad signature too: the signed claim is malformed. `what` and `signerName` word the errors.
 */
export function checkSignedFields(
  what: string,
  signerName: string,
  signedBytes: () => Uint8Array,
  signer: Uint8Array,
  signature: Uint8Array,
): void {
  let msg: Uint8Array;
  try {
    msg = signedBytes();
  } catch (e) {
    if (e instanceof WireError)
      throw new WireError('bad_signature', e.field, `${what} is malformed: ${e.message}`);
    throw e;
  }
  if (!verify(signer, msg, signature))
    throw new WireError('bad_signature', 'signature', `${what} signature does not verify for ${signerName}`);
}
