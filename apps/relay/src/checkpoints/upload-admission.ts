// Whether a client's model checkpoint upload may be stored: its signed headers, the run's agreed parameter
// hash at that epoch end (the coordinator's majority), and a signer that voted on it.
import {
  admitCheckpoint,
  checkpointCanonical,
  checkpointUploaderRank,
  hexToBytes,
  utf8Bytes,
  verify,
} from '@meshtrain/core';
import { modelConfigForRun, parameterCount, parameterSpecs } from '@meshtrain/model';
import type { LlamaConfig } from '@meshtrain/model';
import { readSignedHeaders } from '../middleware/admin-auth.ts';
import type { Relay } from '../relay.ts';
import { runConfigOf } from '../run-config.ts';
import type { UploadAdmission, UploadRefusal, UploadRequest } from './routes.ts';

/**
 * Room for a safetensors file's header beyond the raw f32 data: its 8-byte length, the JSON metadata and one
 * entry per tensor (name, dtype, shape, offsets: ~120 bytes each in practice, padded to 8).
 */
const SAFETENSORS_HEADER_BASE = 4096;
const SAFETENSORS_HEADER_PER_TENSOR = 512;

/** The largest model.safetensors a client can send for `config`: its parameters as f32 and a header. */
export function maxCheckpointBytes(config: LlamaConfig): number {
  return (
    parameterCount(config) * 4 +
    SAFETENSORS_HEADER_BASE +
    parameterSpecs(config).length * SAFETENSORS_HEADER_PER_TENSOR
  );
}

function refusal(status: UploadRefusal['status'], code: string, message: string): UploadRefusal {
  return { ok: false, status, code, message };
}

/**
 * An upload's headers against the run: fresh signature headers, an epoch end of the run with an agreed
 * parameter hash at exactly that (epoch, step), and a signer that voted on it (core's
 * checkpointUploaderRank); then the body's size limit, signature and parameter hash to check it against.
 */
export function admitCheckpointUpload(relay: Relay, req: UploadRequest): UploadAdmission {
  const host = relay.run(req.runId);
  if (!host) return refusal(404, 'unknown_run', `no run '${req.runId}'`);
  const signed = readSignedHeaders(req.header, relay.clock());
  if ('problem' in signed) return refusal(401, 'unauthenticated', signed.problem);
  const { key, ts, sig } = signed;
  const run = runConfigOf(host);
  let config: LlamaConfig;
  try {
    if (!run) throw new Error('unreadable run config');
    config = modelConfigForRun(run);
  } catch (e) {
    return refusal(409, 'no_model', `this run has no model the relay can check: ${(e as Error).message}`);
  }
  const end = relay.store.checkpoints
    .epochEnds(req.runId)
    .find((e) => e.epoch === req.epoch && e.step === req.step && e.agreed_hash !== null);
  if (!end || end.agreed_hash === null)
    return refusal(
      409,
      'no_param_hash',
      `no agreed parameter hash for epoch ${req.epoch} at step ${req.step}; checkpoints are taken only for epoch ends the run reached`,
    );
  if (checkpointUploaderRank(end, key) < 0)
    return refusal(
      403,
      'forbidden',
      `only clients Healthy at the end of epoch ${end.epoch} upload its checkpoint`,
    );
  const agreedHash = end.agreed_hash;
  return {
    ok: true,
    uploader: key,
    config,
    maxBytes: maxCheckpointBytes(config),
    agreedHash,
    signs: (bodySha256) =>
      verify(
        hexToBytes(key, 32),
        utf8Bytes(
          checkpointCanonical({
            runId: req.runId,
            step: req.step,
            epoch: req.epoch,
            safetensorsSha256: bodySha256,
            timestamp: ts,
          }),
        ),
        hexToBytes(sig, 64),
      ),
    accepts: (paramHash) => {
      const refused = admitCheckpoint(host.agreedEpochs(), { epoch: req.epoch, step: req.step, paramHash });
      if (!refused) return null;
      return refusal(
        409,
        refused.code === 'stale' ? 'no_param_hash' : 'param_hash_mismatch',
        refused.message,
      );
    },
  };
}
