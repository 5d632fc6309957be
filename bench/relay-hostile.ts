// Relay under hostile input, measured against the real `meshtrain-relay` bin (with its libp2p node): how
// long /healthz takes while
//   - 3 unsigned checkpoint uploads declaring 300 MB each are streamed at it (refused from their headers),
//   - 20 connections that never join send 8 MiB of frames declared at 128 MiB (cut after 16 KiB),
//   - a 125m-preset run is created and its initial checkpoint (~500 MB) is seeded (in a worker thread),
// and how much the relay's resident memory grows; plus whether a frame with RSV bits set on the libp2p path
// left it alive. Prints exactly one JSON object on stdout:
//   {"baseline":{p50_ms,max_ms},"unsigned_uploads":{statuses,healthz,rss_growth_mb},"pre_join":{…},
//    "rsv_frame":{alive},"seed_125m":{seconds,healthz}}
// Usage: node scripts/run-ts.mjs bench/relay-hostile.ts [--upload-mb 300] [--skip-seed]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fetchCheckpointSummary } from '../packages/client/src/relay-api/index.ts';
import { identityFromSeed, signAdminRequest } from '../packages/core/src/index.ts';
import { fastRunToml } from '../apps/relay/test/helpers/relay-fixtures.ts';
import { frameHead, rawUpgrade, spawnRelay } from '../apps/relay/test/helpers/relay-process.ts';

const MiB = 1024 * 1024;
const flag = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const UPLOAD_BYTES = Number(flag('upload-mb') ?? 300) * 1e6;
const SKIP_SEED = process.argv.includes('--skip-seed');
const log = (m: string): void => void process.stderr.write(`relay-hostile: ${m}\n`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const dir = mkdtempSync(join(tmpdir(), 'meshtrain-bench-hostile-'));
writeFileSync(join(dir, 'run.toml'), fastRunToml('bench'));
const relay = await spawnRelay(['--config', join(dir, 'run.toml'), '--data-dir', join(dir, 'data')]);

async function healthzOnce(): Promise<number> {
  const t = performance.now();
  const res = await fetch(`${relay.url}/healthz`);
  await res.arrayBuffer();
  return performance.now() - t;
}

function summary(ms: number[]): { n: number; p50_ms: number; p99_ms: number; max_ms: number } {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => Number((s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0).toFixed(1));
  return { n: s.length, p50_ms: at(0.5), p99_ms: at(0.99), max_ms: Number((s.at(-1) ?? 0).toFixed(1)) };
}

/** Samples /healthz back to back until `work` settles. */
async function healthzDuring<T>(
  work: Promise<T>,
): Promise<{ result: T; healthz: ReturnType<typeof summary> }> {
  const ms: number[] = [];
  let done = false;
  const sampler = (async () => {
    while (!done) {
      ms.push(await healthzOnce());
      await sleep(20);
    }
  })();
  const result = await work.finally(() => (done = true));
  await sampler;
  return { result, healthz: summary(ms) };
}

/** An unsigned upload declaring `bytes`, sent as fast as the relay takes it; resolves with its status line. */
function unsignedUpload(bytes: number): Promise<{ status: string; sent_mb: number }> {
  return new Promise((resolve) => {
    const s = connect(relay.port, '127.0.0.1');
    const chunk = Buffer.alloc(4 * MiB, 7);
    let sent = 0;
    let head = '';
    s.on('error', () => undefined);
    s.on('data', (d: Buffer) => (head += d.toString('latin1')));
    s.on('close', () => resolve({ status: head.split('\r\n')[0] ?? '', sent_mb: Math.round(sent / MiB) }));
    const pump = (): void => {
      while (sent < bytes && !s.destroyed) {
        const n = Math.min(chunk.length, bytes - sent);
        sent += n;
        if (!s.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void s.once('drain', pump);
      }
      s.end();
    };
    s.once('connect', () => {
      s.write(
        `POST /api/runs/bench/checkpoint HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n` +
          `X-Meshtrain-Step: 9\r\nX-Meshtrain-Epoch: 1\r\nContent-Length: ${bytes}\r\n\r\n`,
      );
      pump();
    });
  });
}

const out: Record<string, unknown> = {};
try {
  for (let i = 0; i < 10; i++) await healthzOnce(); // warm up (connection, JIT)
  const base: number[] = [];
  for (let i = 0; i < 50; i++) base.push(await healthzOnce());
  out.baseline = summary(base);

  log(`3 unsigned uploads of ${UPLOAD_BYTES / 1e6} MB`);
  let rss = relay.rss();
  const uploads = await healthzDuring(Promise.all([0, 1, 2].map(() => unsignedUpload(UPLOAD_BYTES))));
  out.unsigned_uploads = {
    statuses: uploads.result.map((u) => u.status),
    sent_mb: uploads.result.map((u) => u.sent_mb),
    healthz: uploads.healthz,
    rss_growth_mb: Math.round((relay.rss() - rss) / MiB),
  };

  log('20 unjoined connections declaring 128 MiB frames');
  rss = relay.rss();
  const preJoin = await healthzDuring(
    (async () => {
      const sockets = await Promise.all(
        Array.from({ length: 20 }, () => rawUpgrade(relay.port, '/ws/runs/bench')),
      );
      const payload = Buffer.concat([frameHead({ length: 128 * MiB }), Buffer.alloc(8 * MiB, 1)]);
      await Promise.all(
        sockets.map((u) => {
          u.socket.write(payload);
          return u.closed;
        }),
      );
      return sockets.map((u) => u.closeCode());
    })(),
  );
  out.pre_join = {
    close_codes: [...new Set(preJoin.result)],
    healthz: preJoin.healthz,
    rss_growth_mb: Math.round((relay.rss() - rss) / MiB),
  };

  const rsv = await rawUpgrade(relay.port, '/');
  rsv.socket.write(Buffer.concat([frameHead({ rsv: 0b011, length: 1 }), Buffer.from([0])]));
  await rsv.closed;
  out.rsv_frame = { close_code: rsv.closeCode(), alive: relay.alive() };

  if (!SKIP_SEED) {
    log('creating a 125m-preset run (its initial checkpoint is seeded in a worker thread)');
    const creator = identityFromSeed(new Uint8Array(32).fill(9));
    const toml = fastRunToml('seed125').replace('preset = "tiny"', 'preset = "125m"');
    const t = performance.now();
    const seeded = await healthzDuring(
      (async () => {
        const res = await fetch(`${relay.url}/api/runs`, {
          method: 'POST',
          headers: signAdminRequest(creator.secretKey, 'POST', '/api/runs', toml, Date.now()),
          body: toml,
        });
        if (res.status !== 201) throw new Error(`create: HTTP ${res.status} ${await res.text()}`);
        while ((await fetchCheckpointSummary(relay.url, 'seed125')) === null) await sleep(250);
      })(),
    );
    out.seed_125m = { seconds: Number(((performance.now() - t) / 1000).toFixed(1)), healthz: seeded.healthz };
  }
  out.alive = relay.alive();
} finally {
  await relay.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.stdout.write(`${JSON.stringify(out)}\n`);
