// The relay's composed services (wiring.ts) on a real server and data dir: /metrics follows coordinator
// transitions and frame bytes, every run gets a seeded initial checkpoint, and checkpoint uploads are
// accepted only when signed by a client of the run whose parameters hash to the epoch's majority.
import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bytesToHex, encodeParamHash, parseRunConfig, sign } from '@meshtrain/core';
import { relayCheckpoints } from '@meshtrain/client';
import { decodeCheckpoint, hfConfigJson, modelConfigForRun } from '@meshtrain/model';
import type { Identity } from '@meshtrain/core';
import { checkpointCanonical } from '../src/wiring.ts';
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
    services: true,
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

/**
 * Sends an upload's request head declaring `contentLength` bytes, and only the head: resolves with the
 * response head the relay sends without the body (a relay that waited for the body would never answer).
 */
function rawPost(headers: Record<string, string>, contentLength: number): Promise<string> {
  const port = new URL(relay.url).port;
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), '127.0.0.1');
    let got = '';
    s.on('error', reject);
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (got.includes('\r\n\r\n')) {
        s.destroy();
        resolve(got.slice(0, got.indexOf('\r\n\r\n')));
      }
    });
    const lines = [`POST /api/runs/${RUN}/checkpoint HTTP/1.1`, `Host: 127.0.0.1:${port}`];
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
    lines.push(`Content-Length: ${contentLength}`);
    s.write(`${lines.join('\r\n')}\r\n\r\n`);
  });
}

/** A checkpoint upload signed by `id` the way PROTOCOL.md describes: the body and its headers. */
function signedUpload(
  id: Identity,
  u: { step: number; epoch: number; weights: Uint8Array },
  timestamp = Date.now(),
): { body: Uint8Array; headers: Record<string, string> } {
  const canonical = checkpointCanonical({
    runId: RUN,
    step: u.step,
    epoch: u.epoch,
    safetensorsSha256: sha256Hex(u.weights),
    timestamp: String(timestamp),
  });
  const sig = sign(id.secretKey, new TextEncoder().encode(canonical));
  return {
    body: u.weights,
    headers: {
      'Content-Type': 'application/octet-stream',
      'X-Meshtrain-Key': hexKey(id),
      'X-Meshtrain-Timestamp': String(timestamp),
      'X-Meshtrain-Signature': Buffer.from(sig).toString('hex'),
      'X-Meshtrain-Step': String(u.step),
      'X-Meshtrain-Epoch': String(u.epoch),
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
    // relay.db on disk: its WAL is checkpointed by the store's own thread.
    expect(text).toMatch(/meshtrain_store_wal_checkpoint_thread 1/);
    expect(text).toMatch(/meshtrain_store_wal_checkpoint_errors_total 0/);
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
    const member = identity(401);
    const outsider = identity(409);
    const post = (u: { body: Uint8Array; headers: Record<string, string> }) =>
      fetch(`${relay.url}/api/runs/${RUN}/checkpoint`, {
        method: 'POST',
        body: u.body as Uint8Array<ArrayBuffer>,
        headers: u.headers,
      });
    const code = async (r: Response) => ((await r.json()) as { error: { code: string } }).error.code;

    // No epoch end the run reached: nothing can be uploaded, whatever the step (huge ones included).
    const r2 = await post(signedUpload(member, { step: 5, epoch: 0, weights }));
    expect(r2.status).toBe(409);
    expect(await code(r2)).toBe('no_param_hash');
    const far = await post(signedUpload(member, { step: 1_000_000, epoch: 900, weights }));
    expect(far.status).toBe(409);
    // The coordinator's epoch end (recorded by the run host at Cooldown; here written directly) with the
    // member as its only voter. Its report is the agreed hash, and it is not these parameters.
    relay.relay.store.checkpoints.recordEpochEnd(RUN, { epoch: 0, step: 5, voters: [hexKey(member)] });
    const c = open[0]!;
    const wrong = new Uint8Array(32).fill(7);
    expect((await c.request(encodeParamHash({ runId: RUN, epoch: 0, step: 5, hash: wrong }))).kind).toBe(
      'ack',
    );
    // Unsigned.
    const plain = signedUpload(member, { step: 5, epoch: 0, weights });
    const unsigned = Object.fromEntries(
      Object.entries(plain.headers).filter(([k]) => k !== 'X-Meshtrain-Signature'),
    );
    expect((await post({ body: weights, headers: unsigned })).status).toBe(401);
    // Signed over other bytes (a different step than the headers say).
    const forged = signedUpload(member, { step: 5, epoch: 0, weights });
    forged.headers['X-Meshtrain-Step'] = '6';
    expect((await post(forged)).status).toBe(409); // no epoch end at step 6 either
    const tampered = signedUpload(member, { step: 5, epoch: 0, weights });
    const flipped = weights.slice();
    flipped[flipped.length - 1]! ^= 1;
    expect((await post({ body: flipped, headers: tampered.headers })).status).toBe(401);
    // Not a voter of that epoch end.
    const r1 = await post(signedUpload(outsider, { step: 5, epoch: 0, weights }));
    expect(r1.status).toBe(403);
    const r3 = await post(signedUpload(member, { step: 5, epoch: 0, weights }));
    expect(r3.status).toBe(409);
    expect(await code(r3)).toBe('param_hash_mismatch');
    // Bigger than the run's model can be: refused from the headers.
    const huge = await rawPost(
      signedUpload(member, { step: 5, epoch: 0, weights }).headers,
      300 * 1024 * 1024,
    );
    expect(huge).toMatch(/^HTTP\/1\.1 413 /);
    // With the right agreed hash (epoch 1 here), the upload is stored.
    relay.relay.store.checkpoints.recordEpochEnd(RUN, { epoch: 1, step: 9, voters: [hexKey(member)] });
    const right = Uint8Array.from(Buffer.from(summary.paramHash, 'hex'));
    expect((await c.request(encodeParamHash({ runId: RUN, epoch: 1, step: 9, hash: right }))).kind).toBe(
      'ack',
    );
    const metricsText = await (await fetch(`${relay.url}/metrics`)).text();
    expect(metricsText).toMatch(/meshtrain_param_hash_reports\{run="extras"\} 1/);
    expect(metricsText).toMatch(/meshtrain_param_hash_mismatches\{run="extras"\} 0/);
    const r4 = await post(signedUpload(member, { step: 9, epoch: 1, weights }));
    expect(r4.status).toBe(201);
    expect(((await r4.json()) as { step: number }).step).toBe(9);

    // The training client's own upload (packages/client relayCheckpoints) speaks the same format.
    relay.relay.store.checkpoints.recordEpochEnd(RUN, { epoch: 2, step: 13, voters: [hexKey(member)] });
    expect((await c.request(encodeParamHash({ runId: RUN, epoch: 2, step: 13, hash: right }))).kind).toBe(
      'ack',
    );
    const model = modelConfigForRun(parseRunConfig(fastRunToml(RUN)).config);
    const ck = relayCheckpoints({ relayUrl: relay.url, runId: RUN, model, secretKey: member.secretKey });
    const params = decodeCheckpoint(hfConfigJson(model), weights).params;
    await ck.upload!({ step: 13, epoch: 2, paramHash: right, params });
    const stored = await ck.load(13);
    expect(stored && bytesToHex(stored.paramHash)).toBe(summary.paramHash);
  });

  it('answers an unsigned upload of 300 MB from its headers, without waiting for the body', async () => {
    const head = await rawPost(
      { 'Content-Type': 'application/octet-stream', 'X-Meshtrain-Step': '9', 'X-Meshtrain-Epoch': '1' },
      300 * 1024 * 1024,
    );
    expect(head).toMatch(/^HTTP\/1\.1 401 /);
    expect(head).toMatch(/connection: close/i);
  });
});
