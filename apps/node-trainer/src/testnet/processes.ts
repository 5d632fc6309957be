// The testnet's child processes: one `meshtrain-relay run` and the `node-trainer train` (or `verify`)
// processes, each logging to DIR/logs/, the trainers' JSON event lines collected for the summary. Every child
// is in `children` while it runs, so the caller can always end them all.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { hexToBytes, identityFromSeed, signAdminRequest } from '@meshtrain/core';

const nodeTrainerBin = fileURLToPath(new URL('../../bin/node-trainer.mjs', import.meta.url));

export function relayBin(): string {
  const fromEnv = process.env.MESHTRAIN_RELAY_BIN;
  if (fromEnv) return fromEnv;
  // The workspace layout (apps/relay next to apps/node-trainer): the relay is a sibling app, not a dependency.
  return fileURLToPath(new URL('../../../relay/bin/meshtrain-relay.mjs', import.meta.url));
}

export interface RelayProcess {
  url: string;
  log: WriteStream;
  /** Pauses or resumes the testnet run, signed as its main authority. */
  admin: (action: 'pause' | 'resume') => Promise<void>;
}

/**
 * Signed admin requests for the run the relay created from --config: its main authority is the relay's own
 * identity, whose seed the relay keeps in the data dir the testnet gave it (relay-identity.json).
 */
async function relayAdmin(url: string, dataDir: string) {
  const { seed } = JSON.parse(await readFile(join(dataDir, 'relay-identity.json'), 'utf8')) as {
    seed: string;
  };
  const { secretKey } = identityFromSeed(hexToBytes(seed));
  return async (action: 'pause' | 'resume') => {
    const path = `/api/runs/testnet/${action}`;
    const res = await fetch(new URL(path, url), {
      method: 'POST',
      headers: signAdminRequest(secretKey, 'POST', path, '', Date.now()),
    });
    if (!res.ok) throw new Error(`the relay refused to ${action} the run: ${res.status} ${await res.text()}`);
  };
}

/** Starts the relay on a free loopback port and resolves with its URL once it listens. */
export async function launchRelay(
  dir: string,
  configPath: string,
  children: Set<ChildProcess>,
  joinPowBits: number,
  maxIdentitiesPerAddress?: number,
): Promise<RelayProcess> {
  const relay = spawn(
    process.execPath,
    [
      relayBin(),
      'run',
      '--config',
      configPath,
      '--port',
      '0',
      '--data-dir',
      join(dir, 'relay'),
      '--grace-ms',
      '2000',
      '--join-pow-bits',
      String(joinPowBits),
      ...(maxIdentitiesPerAddress === undefined
        ? []
        : ['--max-identities-per-address', String(maxIdentitiesPerAddress)]),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.add(relay);
  const log = createWriteStream(join(dir, 'logs', 'relay.log'));
  relay.stderr?.pipe(log);
  const url = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: relay.stdout as NodeJS.ReadableStream });
    const timer = setTimeout(() => reject(new Error('the relay did not start within 60 s')), 60_000);
    rl.on('line', (line) => {
      log.write(`${line}\n`);
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1] as string);
      }
    });
    relay.once('exit', (code) =>
      reject(new Error(`the relay exited (${code}) before listening; see ${dir}/logs/relay.log`)),
    );
  });
  return { url, log, admin: await relayAdmin(url, join(dir, 'relay')) };
}

export interface TrainerEvent {
  type: string;
  [k: string]: unknown;
}

export interface TrainerSpec {
  index: number;
  /** Log file name, e.g. `trainer-0` or `adversary-3-dense`. */
  name: string;
  /** Prefix of its progress lines, e.g. `trainer 0` or `adversary 3 (dense)`. */
  label: string;
  /** Path of its identity file. */
  identity: string;
  /**
   * Honest trainers (late joiners included), an adversary (`train --adversary KIND`), or a trusted verifier
   * (`node-trainer verify`, its key in the run's trusted_verifiers).
   */
  role: 'honest' | 'adversary' | 'verifier';
  /** The node-trainer command it runs: `train`, or `verify` (trusted verifiers). */
  command: 'train' | 'verify';
  /** Extra arguments of its command (the adversary's, the honest trainers' --replica). */
  args: string[];
  /** The coordinator ids it joins as (many for the sybil process). */
  ids: string[];
}

export interface Trainer extends TrainerSpec {
  child: ChildProcess | null;
  restarts: number;
  exited: Promise<void>;
  /** When its current process reported `done` (the event's own time, ms since the epoch), or null. */
  doneAt: number | null;
  /** How its current process ended (ms since the epoch), or null while it runs. */
  exit: { code: number | null; signal: NodeJS.Signals | null; at: number } | null;
  /** Whether its current process said it outlived its session (the `lingering` event) and ended itself. */
  lingered: boolean;
}

/** The trainer processes, and every JSON event line they printed. */
export class TrainerPool {
  readonly trainers: Trainer[] = [];
  readonly events: { trainer: number; e: TrainerEvent }[] = [];
  private readonly dir: string;
  private readonly url: string;
  private readonly children: Set<ChildProcess>;
  private readonly log: (line: string) => void;
  private readonly p2pHost: string;

  constructor(o: {
    dir: string;
    url: string;
    children: Set<ChildProcess>;
    log: (line: string) => void;
    /** The trainers' `--p2p-host` (default 127.0.0.1: libp2p over the relay's circuit, no WebRTC). */
    p2pHost?: string;
  }) {
    this.dir = o.dir;
    this.url = o.url;
    this.children = o.children;
    this.log = o.log;
    this.p2pHost = o.p2pHost ?? '127.0.0.1';
  }

  /** Adds a trainer and starts it. */
  add(spec: TrainerSpec): Trainer {
    const t: Trainer = {
      ...spec,
      child: null,
      restarts: 0,
      exited: Promise.resolve(),
      doneAt: null,
      exit: null,
      lingered: false,
    };
    this.trainers.push(t);
    this.start(t);
    return t;
  }

  /** (Re)starts `t`'s process; its log file is appended to. */
  start(t: Trainer): void {
    const child = spawn(
      process.execPath,
      [
        nodeTrainerBin,
        t.command,
        '--relay',
        this.url,
        '--run-id',
        'testnet',
        '--device',
        'cpu',
        '--identity',
        t.identity,
        '--log',
        'json',
        '--p2p-host',
        this.p2pHost,
        ...t.args,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.children.add(child);
    t.child = child;
    t.doneAt = null;
    t.exit = null;
    t.lingered = false;
    const log = createWriteStream(join(this.dir, 'logs', `${t.name}.log`), { flags: 'a' });
    child.stderr?.pipe(log);
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      log.write(`${line}\n`);
      this.record(t, line);
    });
    t.exited = new Promise<void>((resolve) =>
      child.once('exit', (code, signal) => {
        this.children.delete(child);
        if (t.child === child) t.exit = { code, signal, at: Date.now() };
        resolve();
      }),
    );
  }

  /**
   * Waits until every one of `trainers` exited, or for at least `minMs`, then until `graceMs` after the
   * latest `done` any of them reported (a trainer exits by itself after its `done`), at most `maxMs`.
   */
  async settle(trainers: readonly Trainer[], o: { minMs: number; graceMs: number; maxMs: number }) {
    const start = Date.now();
    for (;;) {
      const running = trainers.filter((t) => t.exit === null && t.child !== null);
      if (running.length === 0) return;
      const lastDone = Math.max(0, ...trainers.map((t) => t.doneAt ?? 0));
      const until = Math.min(start + o.maxMs, Math.max(start + o.minMs, lastDone + o.graceMs));
      if (Date.now() >= until) return;
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  allExited(): Promise<void> {
    return Promise.all(this.trainers.map((t) => t.exited)).then(() => {});
  }

  /** Collects one stdout line of trainer `t` and logs the interesting ones. */
  private record(t: Trainer, line: string): void {
    let e: TrainerEvent;
    try {
      e = JSON.parse(line) as TrainerEvent;
    } catch {
      return; // Not a JSON line: already in the log file.
    }
    this.events.push({ trainer: t.index, e });
    if (e.type === 'done')
      t.doneAt = Number.isFinite(Date.parse(String(e.t))) ? Date.parse(String(e.t)) : Date.now();
    if (e.type === 'lingering') t.lingered = true;
    const say = (s: string) => this.log(`${t.label}: ${s}`);
    if (e.type === 'trained') say(`step ${String(e.step)} loss ${Number(e.loss).toFixed(4)}`);
    else if (e.type === 'eval')
      say(`held-out loss ${Number(e.val_loss).toFixed(4)} at step ${String(e.step)}`);
    else if (e.type === 'paramHash') say(`epoch ${String(e.epoch)} hash ${String(e.hash).slice(0, 16)}…`);
    else if (e.type === 'sybils')
      say(`${String(e.joined)} of ${String(e.wanted)} sybil identities joined, ${String(e.refused)} refused`);
    else if (e.type === 'resync' || e.type === 'error')
      say(`${e.type}: ${String(e.reason ?? e.message).split('\n')[0]}`);
    else if (e.type === 'model' && e.source === 'checkpoint')
      say(
        `loaded the parameters of step ${String(e.step)} from ${String(e.via ?? 'the relay')}, hash verified`,
      );
  }
}
