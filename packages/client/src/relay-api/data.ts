// The relay's data routes, typed: a run's dataset manifest, and samples of either split decoded in one place.
import { RelayApiError } from './errors.ts';
import { ensureOk, get, getJson, runPath, type RequestOptions } from './request.ts';
import { DataManifestResponseSchema } from './schemas.ts';
import type { DataManifestResponse, DataSplit } from './types.ts';

/** GET /api/runs/:id/data/manifest. */
export function fetchDataManifest(
  relayUrl: string,
  runId: string,
  o: RequestOptions = {},
): Promise<DataManifestResponse> {
  return getJson(relayUrl, `${runPath(runId)}/data/manifest`, DataManifestResponseSchema, o);
}

/** A /data/samples body: little-endian int32 token ids, sample after sample. */
export function decodeSamples(bytes: Uint8Array): Int32Array {
  if (bytes.length % 4 !== 0) throw new Error(`${bytes.length} bytes of samples are not whole int32 ids`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Int32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt32(4 * i, true);
  return out;
}

/**
 * Samples `start..end` (inclusive) of `split`: `(end − start + 1) × sampleTokens` ids, checked to be exactly
 * that many. `bytes` is the body's size on the wire.
 */
export async function fetchSamples(
  relayUrl: string,
  runId: string,
  q: { split: DataSplit; start: number; end: number; sampleTokens: number },
  o: RequestOptions = {},
): Promise<{ tokens: Int32Array; bytes: number }> {
  const path = `${runPath(runId)}/data/samples?split=${q.split}&start=${q.start}&end=${q.end}`;
  const res = await ensureOk(await get(relayUrl, path, o), path);
  const body = new Uint8Array(await res.arrayBuffer());
  const want = (q.end - q.start + 1) * q.sampleTokens;
  if (body.length !== want * 4)
    throw new RelayApiError({
      status: res.status,
      code: 'bad_response',
      message: `${body.length} bytes for ${q.end - q.start + 1} samples of ${q.sampleTokens} int32 ids (${want * 4} expected)`,
      request: `GET ${path}`,
    });
  return { tokens: decodeSamples(body), bytes: body.length };
}
