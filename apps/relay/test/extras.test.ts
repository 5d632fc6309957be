// The relay's composed services (extras.ts) on a real server and data dir: /metrics follows coordinator
// transitions and frame bytes, every run gets a seeded initial checkpoint, and checkpoint uploads are
// accepted only when signed by a client of the run whose parameters hash to the epoch's majority.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeParamHash, sign } from '@meshtrain/core';
import type { Identity } from '@meshtrain/core';
import { checkpointCanonical, defaultExtraRoutes } from '../src/extras.ts';
import { startRelayServer } from '../src/server.ts';
import type { RunningRelay } from '../src/server.ts';
import { fastRunToml, hexKey, identity, TestClient } from './helpers/relay-fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'meshtrain-relay-extras-'));
let relay: RunningRelay;
const RUN = 'extras';
const open: TestClient[] = [];

beforeAll(async () => {
  relay = await startRelayServer({
    dataDir: dir,
    tickMs: 50,
    extraRoutes: (r) => defaultExtraRoutes(r, dir),
  });
  relay.relay.createRun({ toml: fastRunToml(RUN), mainAuthority: hexKey(identity(400)) });
});

afterAll(async () => {
  for (const c of open) c.close();
  await relay.close();
  rmSync(dir, { recursive: true, force: true });
});

async function waitFor<T>(f: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

const sha256Hex = (b: Uint8Array | string) => createHash('sha256').update(b).digest('hex');

/** A checkpoint upload form signed by `id` the way PROTOCOL.md describes. */
function signedUpload(
  id: Identity,
  u: { step: number; epoch: number; weights: Uint8Array; configText: string },
  timestamp = Date.now(),
): { body: FormData; headers: Record<string, string> } {
  const body = new FormData();
  body.set('model.safetensors', new Blob([u.weights as Uint8Array<ArrayBuffer>]), 'model.safetensors');
  // A file part: string parts of multipart/form-data get their line breaks normalised to CRLF.
  body.set('config.json', new Blob([u.configText]), 'config.json');
  body.set('step', String(u.step));
  body.set('epoch', String(u.epoch));
  const canonical = checkpointCanonical({
    runId: RUN,
    step: u.step,
    epoch: u.epoch,
    safetensorsSha256: sha256Hex(u.weights),
    configSha256: sha256Hex(u.configText),
    timestamp: String(timestamp),
  });
  const sig = sign(id.secretKey, new TextEncoder().encode(canonical));
  return {
    body,
    headers: {
      'X-Meshtrain-Key': hexKey(id),
      'X-Meshtrain-Timestamp': String(timestamp),
      'X-Meshtrain-Signature': Buffer.from(sig).toString('hex'),
    },
  };
}

describe('composed services', () => {
  it('/metrics reflects the run and the frames', async () => {
    const c = await TestClient.joined(relay.url, RUN, identity(401));
    open.push(c);
    const text = await (await fetch(`${relay.url}/metrics`)).text();
    expect(text).toMatch(/meshtrain_clients\{run="extras",state="Waiting"\} 1/);
    expect(text).toMatch(/meshtrain_bytes_in_total \d+/);
    expect(Number(/meshtrain_bytes_in_total (\d+)/.exec(text)![1])).toBeGreaterThan(0);
    const missing = await fetch(`${relay.url}/api/runs/nope/data/manifest`);
    expect(missing.status).toBe(404);
  });

  it('seeds an initial checkpoint and accepts only signed uploads of an agreed epoch end, with its hash', async () => {
    const summary = await waitFor(async () => {
      const r = await fetch(`${relay.url}/api/runs/${RUN}/checkpoint`);
      return r.ok
        ? ((await r.json()) as { step: number; paramHash: string; files: Record<string, string> })
        : undefined;
    });
    expect(summary.step).toBe(1);
    const weights = new Uint8Array(
      await (await fetch(`${relay.url}${summary.files['model.safetensors']!}`)).arrayBuffer(),
    );
    const configText = await (await fetch(`${relay.url}${summary.files['config.json']!}`)).text();
    const member = identity(401);
    const outsider = identity(409);
    const post = (u: { body: FormData; headers: Record<string, string> }) =>
      fetch(`${relay.url}/api/runs/${RUN}/checkpoint`, { method: 'POST', body: u.body, headers: u.headers });
    const code = async (r: Response) => ((await r.json()) as { error: { code: string } }).error.code;

    // Unsigned.
    const plain = signedUpload(member, { step: 5, epoch: 0, weights, configText });
    const r0 = await fetch(`${relay.url}/api/runs/${RUN}/checkpoint`, { method: 'POST', body: plain.body });
    expect(r0.status).toBe(401);
    // Signed over other bytes (a different step than the form says).
    const forged = signedUpload(member, { step: 5, epoch: 0, weights, configText });
    forged.body.set('step', '6');
    expect((await post(forged)).status).toBe(401);
    // Not a client of the run.
    const r1 = await post(signedUpload(outsider, { step: 5, epoch: 0, weights, configText }));
    expect(r1.status).toBe(403);
    // No epoch end the run reached: nothing can be uploaded, whatever the step (huge ones included).
    const r2 = await post(signedUpload(member, { step: 5, epoch: 0, weights, configText }));
    expect(r2.status).toBe(409);
    expect(await code(r2)).toBe('no_param_hash');
    const far = await post(signedUpload(member, { step: 1_000_000, epoch: 900, weights, configText }));
    expect(far.status).toBe(409);
    // The coordinator's epoch end (recorded by the run host at Cooldown; here written directly) with the
    // member as its only voter. Its report is the agreed hash, and it is not these parameters.
    relay.relay.store.recordEpochEnd(RUN, { epoch: 0, step: 5, voters: [hexKey(member)] });
    const c = open[0]!;
    const wrong = new Uint8Array(32).fill(7);
    expect((await c.request(encodeParamHash({ runId: RUN, epoch: 0, step: 5, hash: wrong }))).kind).toBe(
      'ack',
    );
    const r3 = await post(signedUpload(member, { step: 5, epoch: 0, weights, configText }));
    expect(r3.status).toBe(409);
    expect(await code(r3)).toBe('param_hash_mismatch');
    // With the right agreed hash (epoch 1 here), the upload is stored.
    relay.relay.store.recordEpochEnd(RUN, { epoch: 1, step: 9, voters: [hexKey(member)] });
    const right = Uint8Array.from(Buffer.from(summary.paramHash, 'hex'));
    expect((await c.request(encodeParamHash({ runId: RUN, epoch: 1, step: 9, hash: right }))).kind).toBe(
      'ack',
    );
    const metricsText = await (await fetch(`${relay.url}/metrics`)).text();
    expect(metricsText).toMatch(/meshtrain_param_hash_reports\{run="extras"\} 1/);
    expect(metricsText).toMatch(/meshtrain_param_hash_mismatches\{run="extras"\} 0/);
    const r4 = await post(signedUpload(member, { step: 9, epoch: 1, weights, configText }));
    expect(r4.status).toBe(201);
    expect(((await r4.json()) as { step: number }).step).toBe(9);
  });
});
