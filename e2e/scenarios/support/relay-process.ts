// The real relay as a child process (`meshtrain-relay run`), on a free port and a temp data dir, serving the
// web build. Its output is kept so a failing scenario can show what the relay said.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../../lib/serve.ts';

export interface RelayProcess {
  /** http://127.0.0.1:PORT */
  url: string;
  /** Public key (hex) of the relay's own identity: main authority of the runs it creates at startup. */
  relayKey: string;
  dataDir: string;
  /** Everything the relay printed so far. */
  output(): string;
  stop(): Promise<void>;
}

export interface StartRelayOptions {
  /** Extra `meshtrain-relay run` flags (e.g. ['--config', file]). */
  args?: readonly string[];
  timeoutMs?: number;
  /** Start the relay's libp2p node (off by default: most scenarios only need the coordinator and HTTP). */
  p2p?: boolean;
}

export async function startRelayProcess(opts: StartRelayOptions = {}): Promise<RelayProcess> {
  const dataDir = await mkdtemp(join(tmpdir(), 'meshtrain-e2e-relay-'));
  const args = [
    join(REPO_ROOT, 'apps/relay/bin/meshtrain-relay.mjs'),
    'run',
    '--port',
    '0',
    '--host',
    '127.0.0.1',
    '--data-dir',
    dataDir,
    ...(opts.p2p === true ? [] : ['--no-p2p']),
    // The scenarios are not about the join puzzle (apps/relay/test/sybil.test.ts is): a light one keeps joins
    // of SwiftShader tabs on a loaded 2-core machine quick.
    '--join-pow-bits',
    '8',
    ...(opts.args ?? []),
  ];
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const timeoutMs = opts.timeoutMs ?? 60_000;
  const started = Date.now();
  let url: string | undefined;
  let relayKey: string | undefined;
  while (url === undefined || relayKey === undefined) {
    url = /listening on (http:\/\/[^\s]+)/.exec(out)?.[1];
    relayKey = /relay key ([0-9a-f]{64})/.exec(out)?.[1];
    if (child.exitCode !== null)
      throw new Error(`the relay exited with ${child.exitCode} before listening:\n${out}`);
    if (Date.now() - started > timeoutMs) {
      child.kill('SIGKILL');
      throw new Error(`the relay did not start listening within ${timeoutMs} ms:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  let stopping: Promise<void> | undefined;
  return {
    url,
    relayKey,
    dataDir,
    output: () => out,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode === null) {
          child.kill('SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
          await exited;
          clearTimeout(timer);
        }
        await rm(dataDir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}

/** Polls `check` until it returns a value other than undefined, or fails with `what` after timeoutMs. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 20_000,
): Promise<T> {
  const t0 = Date.now();
  let last: unknown;
  while (Date.now() - t0 < timeoutMs) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}`,
  );
}
