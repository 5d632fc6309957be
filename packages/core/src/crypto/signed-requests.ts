// Signed HTTP requests to the relay (apps/relay/PROTOCOL.md "Admin" and "Checkpoints"): the strings an Ed25519
// signature covers and the headers that carry it. One definition for the relay that verifies and for every
// client that signs (the web admin console, the training clients' checkpoint uploads, CLIs, tests).
import { bytesToHex, utf8Bytes } from './bytes.ts';
import { publicKeyOf, sign } from './ed25519.ts';
import { sha256Hex } from './hash.ts';

export const SIGNED_HEADER_KEY = 'X-Meshtrain-Key';
export const SIGNED_HEADER_TIMESTAMP = 'X-Meshtrain-Timestamp';
export const SIGNED_HEADER_SIGNATURE = 'X-Meshtrain-Signature';
/**
 * A checkpoint upload's step and epoch travel in headers, beside the signature's: the relay decides from the
 * headers alone (who signs, for which epoch end, how big the body may be) before it reads a byte of the body.
 */
export const CHECKPOINT_HEADER_STEP = 'X-Meshtrain-Step';
export const CHECKPOINT_HEADER_EPOCH = 'X-Meshtrain-Epoch';

export const ADMIN_SIGNATURE_TAG = 'meshtrain-admin/v1';
/** v2: the body is model.safetensors alone (v1 signed a multipart form with config.json too). */
export const CHECKPOINT_SIGNATURE_TAG = 'meshtrain-checkpoint/v2';

/**
 * `TAG \n METHOD \n PATH(+query) \n TIMESTAMP \n sha256hex(body)`: `path` is the URL path plus query as sent,
 * `timestamp` unix milliseconds as a decimal string.
 */
export function adminCanonical(method: string, path: string, timestamp: string, body: string): string {
  return `${ADMIN_SIGNATURE_TAG}\n${method.toUpperCase()}\n${path}\n${timestamp}\n${sha256Hex(utf8Bytes(body))}`;
}

/**
 * What a checkpoint upload's signature binds: the run, step, epoch, the SHA-256 (hex) of the body (the
 * model.safetensors bytes; the model's config is the run's, so it is not sent) and the time.
 */
export interface CheckpointUploadFields {
  runId: string;
  step: number;
  epoch: number;
  safetensorsSha256: string;
  timestamp: string;
}

/** The upload's canonical string: it cannot be replayed for another run or with other bytes. */
export function checkpointCanonical(u: CheckpointUploadFields): string {
  return [CHECKPOINT_SIGNATURE_TAG, u.runId, u.step, u.epoch, u.safetensorsSha256, u.timestamp].join('\n');
}

function signedHeaders(secretKey: Uint8Array, canonical: string, timestamp: string): Record<string, string> {
  return {
    [SIGNED_HEADER_KEY]: bytesToHex(publicKeyOf(secretKey)),
    [SIGNED_HEADER_TIMESTAMP]: timestamp,
    [SIGNED_HEADER_SIGNATURE]: bytesToHex(sign(secretKey, utf8Bytes(canonical))),
  };
}

/** Headers for a signed admin request. */
export function signAdminRequest(
  secretKey: Uint8Array,
  method: string,
  path: string,
  body: string,
  timestampMs: number,
): Record<string, string> {
  const ts = String(timestampMs);
  return signedHeaders(secretKey, adminCanonical(method, path, ts, body), ts);
}

/** Headers for a signed checkpoint upload: the signature's, plus the step and epoch it names. */
export function signCheckpointUpload(
  secretKey: Uint8Array,
  u: CheckpointUploadFields,
): Record<string, string> {
  return {
    ...signedHeaders(secretKey, checkpointCanonical(u), u.timestamp),
    [CHECKPOINT_HEADER_STEP]: String(u.step),
    [CHECKPOINT_HEADER_EPOCH]: String(u.epoch),
  };
}
