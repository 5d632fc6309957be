import { describe, expect, it } from 'vitest';
import {
  SIGNED_HEADER_KEY,
  SIGNED_HEADER_SIGNATURE,
  SIGNED_HEADER_TIMESTAMP,
  adminCanonical,
  bytesToHex,
  CHECKPOINT_HEADER_EPOCH,
  CHECKPOINT_HEADER_STEP,
  checkpointCanonical,
  hexToBytes,
  identityFromSeed,
  signAdminRequest,
  signCheckpointUpload,
  utf8Bytes,
  verify,
} from '../src/index.ts';

describe('signed admin requests', () => {
  it('cover tag, upper-cased method, path with query, timestamp and the body hash', () => {
    expect(adminCanonical('post', '/api/runs', '1', '')).toBe(
      'meshtrain-admin/v1\nPOST\n/api/runs\n1\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    );
  });
  it('carry the key, the timestamp and a signature that verifies over the canonical string only', () => {
    const id = identityFromSeed(new Uint8Array(32).fill(9));
    const body = 'run_id = "x"\n';
    const ts = 1_795_000_000_000;
    const h = signAdminRequest(id.secretKey, 'POST', '/api/runs?paused=1', body, ts);
    expect(h[SIGNED_HEADER_KEY]).toBe(bytesToHex(id.publicKey));
    expect(h[SIGNED_HEADER_TIMESTAMP]).toBe(String(ts));
    const sig = hexToBytes(h[SIGNED_HEADER_SIGNATURE] as string, 64);
    const canonical = adminCanonical('POST', '/api/runs?paused=1', String(ts), body);
    expect(verify(id.publicKey, utf8Bytes(canonical), sig)).toBe(true);
    const otherPath = adminCanonical('POST', '/api/runs', String(ts), body);
    expect(verify(id.publicKey, utf8Bytes(otherPath), sig)).toBe(false);
  });
  it('sign checkpoint uploads over run, step, epoch, the body hash and time', () => {
    const id = identityFromSeed(new Uint8Array(32).fill(7));
    const u = {
      runId: 'r',
      step: 5,
      epoch: 1,
      safetensorsSha256: 'aa',
      timestamp: '1795000000000',
    };
    expect(checkpointCanonical(u)).toBe('meshtrain-checkpoint/v2\nr\n5\n1\naa\n1795000000000');
    const h = signCheckpointUpload(id.secretKey, u);
    expect([h[CHECKPOINT_HEADER_STEP], h[CHECKPOINT_HEADER_EPOCH]]).toEqual(['5', '1']);
    expect(h[SIGNED_HEADER_KEY]).toBe(bytesToHex(id.publicKey));
    expect(h[SIGNED_HEADER_TIMESTAMP]).toBe(u.timestamp);
    const sig = hexToBytes(h[SIGNED_HEADER_SIGNATURE] as string, 64);
    expect(verify(id.publicKey, utf8Bytes(checkpointCanonical(u)), sig)).toBe(true);
    expect(verify(id.publicKey, utf8Bytes(checkpointCanonical({ ...u, step: 6 })), sig)).toBe(false);
  });
});
