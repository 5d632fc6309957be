import { describe, expect, it } from 'vitest';
import {
  ADMIN_HEADER_KEY,
  ADMIN_HEADER_SIGNATURE,
  ADMIN_HEADER_TIMESTAMP,
  adminCanonical,
  bytesToHex,
  hexToBytes,
  identityFromSeed,
  signAdminRequest,
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
    expect(h[ADMIN_HEADER_KEY]).toBe(bytesToHex(id.publicKey));
    expect(h[ADMIN_HEADER_TIMESTAMP]).toBe(String(ts));
    const sig = hexToBytes(h[ADMIN_HEADER_SIGNATURE] as string, 64);
    const canonical = adminCanonical('POST', '/api/runs?paused=1', String(ts), body);
    expect(verify(id.publicKey, utf8Bytes(canonical), sig)).toBe(true);
    const otherPath = adminCanonical('POST', '/api/runs', String(ts), body);
    expect(verify(id.publicKey, utf8Bytes(otherPath), sig)).toBe(false);
  });
});
