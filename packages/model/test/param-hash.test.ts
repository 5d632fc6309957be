// The parameter hash clients report and the relay checks uploads against. It used to exist twice (client and
// relay) with a test holding them equal; one implementation now serves both, so this test holds it equal to
// an independent reference (node:crypto over the spec's byte stream) instead.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { bytesToHex } from '@meshtrain/core';
import { PRESETS, initParameters, parameterHash, parameterHashHex, parameterOrder } from '../src/index.ts';

/** The definition, written out independently: sorted names, each tensor's float32 LE bytes, SHA-256. */
function referenceHex(params: ReadonlyMap<string, Float32Array>): string {
  const h = createHash('sha256');
  for (const name of [...params.keys()].sort()) {
    const t = params.get(name)!;
    const le = new DataView(new ArrayBuffer(t.byteLength));
    t.forEach((v, i) => le.setFloat32(4 * i, v, true));
    h.update(new Uint8Array(le.buffer));
  }
  return h.digest('hex');
}

describe('parameter hash', () => {
  it('equals the reference definition, as bytes and as hex, and ignores map order', () => {
    const p = initParameters(PRESETS.micro, 3);
    const reversed = new Map([...p].reverse());
    expect(parameterHashHex(reversed)).toBe(parameterHashHex(p));
    expect(parameterHash(p)).toHaveLength(32);
    expect(parameterHashHex(p)).toBe(bytesToHex(parameterHash(p)));
    expect(parameterHashHex(p)).toBe(referenceHex(p));
    const q = new Map(p);
    const t = Float32Array.from(q.get('model.norm.weight')!);
    t[0] = Math.fround(t[0]! + 1e-6);
    q.set('model.norm.weight', t);
    expect(parameterHashHex(q)).not.toBe(parameterHashHex(p));
    expect(parameterHashHex(q)).toBe(referenceHex(q));
  });

  it('orders names by code unit, as DisTrO does', () => {
    expect(parameterOrder(['b', 'a.z', 'a', 'B', 'a.b'])).toEqual(['B', 'a', 'a.b', 'a.z', 'b']);
  });
});
