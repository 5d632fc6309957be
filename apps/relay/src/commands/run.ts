// `meshtrain-relay run`: start the relay server. On a fresh data dir it creates the run from --config (or the
// embedded default run); on an existing one it resumes every run from its latest snapshot, so `kill -9` and
// restart continue where the relay stopped (clients reconnect and re-join).
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  bytesToHex,
  DEFAULT_RUN_TOML,
  hexToBytes,
  identityFromSeed,
  MAX_JOIN_POW_BITS,
  parseRunConfig,
  RunConfigError,
  withTrustedVerifiers,
  isHex32,
} from '@meshtrain/core';
import { CliError, type Command } from '../command.ts';
import {
  DEFAULT_DATA_DIR,
  DEFAULT_GRACE_MS,
  DEFAULT_HOST,
  DEFAULT_JOIN_POW_BITS,
  DEFAULT_MAX_IDENTITIES_PER_ADDRESS,
  DEFAULT_MAX_MODEL_PARAMS,
  DEFAULT_MAX_RUNS,
  DEFAULT_MAX_RUNS_PER_CREATOR,
  DEFAULT_PORT,
  DEFAULT_TICK_MS,
} from '../defaults.ts';
import { loadOrCreateRelayIdentity } from '../identity.ts';
import { RelayError } from '../relay.ts';
import { startP2P } from '../wiring.ts';
import { startRelayServer, type RunningRelay } from '../server.ts';

const USAGE =
  `[--config run.toml] [--port ${DEFAULT_PORT}] [--host ${DEFAULT_HOST}] [--data-dir ${DEFAULT_DATA_DIR}] ` +
  `[--tick-ms ${DEFAULT_TICK_MS}] [--grace-ms ${DEFAULT_GRACE_MS}] [--max-frame-bytes N] ` +
  `[--run-creators HEX[,HEX…]]... [--max-model-params ${DEFAULT_MAX_MODEL_PARAMS}] ` +
  `[--max-runs-per-creator ${DEFAULT_MAX_RUNS_PER_CREATOR}] [--max-runs ${DEFAULT_MAX_RUNS}] ` +
  `[--join-pow-bits ${DEFAULT_JOIN_POW_BITS}] [--max-identities-per-address ${DEFAULT_MAX_IDENTITIES_PER_ADDRESS}] ` +
  '[--public-host NAME] [--no-p2p] [--verifier-identity FILE]... [--trusted-verifier HEX]...';

/** `--run-creators a,b --run-creators c` (and the older `--admin-key a --admin-key b`) as one list. */
function keyList(name: string, values: readonly string[]): string[] {
  const keys = values.flatMap((v) => v.split(',')).map((k) => k.trim());
  for (const k of keys)
    if (!isHex32(k)) throw new CliError(`run: --${name} takes public keys of 64 lowercase hex digits`);
  return keys;
}

function intFlag(name: string, v: string | undefined, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new CliError(`run: --${name} must be an integer in ${min}..${max}`);
  return n;
}

function readConfig(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliError(`run: cannot read ${file}: ${(err as Error).message}`);
  }
}

/** The command line, checked: every value in range or a CliError. */
function parseFlags(argv: string[]) {
  let values;
  try {
    values = parseArgs({
      args: argv,
      options: {
        config: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        'data-dir': { type: 'string' },
        'tick-ms': { type: 'string' },
        'grace-ms': { type: 'string' },
        'max-frame-bytes': { type: 'string' },
        'run-creators': { type: 'string', multiple: true },
        // The earlier name of --run-creators, kept so existing command lines keep working.
        'admin-key': { type: 'string', multiple: true },
        'max-model-params': { type: 'string' },
        'max-runs-per-creator': { type: 'string' },
        'max-runs': { type: 'string' },
        'join-pow-bits': { type: 'string' },
        'max-identities-per-address': { type: 'string' },
        'no-p2p': { type: 'boolean' },
        'public-host': { type: 'string' },
        'verifier-identity': { type: 'string', multiple: true },
        'trusted-verifier': { type: 'string', multiple: true },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    throw new CliError(`run: ${(err as Error).message}\nusage: meshtrain-relay run ${USAGE}`);
  }
  const flags = {
    config: values.config,
    host: values.host,
    publicHost: values['public-host'],
    noP2P: values['no-p2p'] === true,
    port: intFlag('port', values.port, 0, 65535) ?? DEFAULT_PORT,
    tickMs: intFlag('tick-ms', values['tick-ms'], 10, 60_000),
    graceMs: intFlag('grace-ms', values['grace-ms'], 0, 3_600_000),
    maxFrameBytes: intFlag('max-frame-bytes', values['max-frame-bytes'], 1024, 1024 * 1024 * 1024),
    runCreators: [
      ...keyList('run-creators', values['run-creators'] ?? []),
      ...keyList('admin-key', values['admin-key'] ?? []),
    ],
    maxModelParams: intFlag('max-model-params', values['max-model-params'], 1, Number.MAX_SAFE_INTEGER),
    maxRunsPerCreator: intFlag('max-runs-per-creator', values['max-runs-per-creator'], 1, 1_000_000),
    maxRuns: intFlag('max-runs', values['max-runs'], 1, 1_000_000),
    joinPowBits:
      intFlag('join-pow-bits', values['join-pow-bits'], 0, MAX_JOIN_POW_BITS) ?? DEFAULT_JOIN_POW_BITS,
    maxIdentitiesPerAddress:
      intFlag('max-identities-per-address', values['max-identities-per-address'], 1, 1_000_000) ??
      DEFAULT_MAX_IDENTITIES_PER_ADDRESS,
    dataDir: resolve(values['data-dir'] ?? DEFAULT_DATA_DIR),
    trustedVerifiers: [
      ...(values['verifier-identity'] ?? []).map(verifierKeyOf),
      ...keyList('trusted-verifier', values['trusted-verifier'] ?? []),
    ],
  };
  if (values['admin-key'] !== undefined)
    console.error('meshtrain-relay: warning: --admin-key is now called --run-creators');
  return flags;
}

type Flags = ReturnType<typeof parseFlags>;

/**
 * The public key of a node-trainer identity file (its 32-byte Ed25519 seed as hex): the verifier the relay's
 * host runs beside it (`node-trainer verify --identity FILE`), listed as trusted in the embedded default run.
 */
function verifierKeyOf(file: string): string {
  const hex = readConfig(file).trim().toLowerCase();
  if (!isHex32(hex))
    throw new CliError(`run: --verifier-identity ${file}: expected a node-trainer identity (64 hex digits)`);
  return bytesToHex(identityFromSeed(hexToBytes(hex)).publicKey);
}

/** The --config file's text, refused here (exit 1) when core cannot parse it. */
function checkedConfig(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  const text = readConfig(file);
  try {
    parseRunConfig(text);
  } catch (e) {
    if (e instanceof RunConfigError) throw new CliError(`run: ${file}: ${e.message}`, 1);
    throw e;
  }
  return text;
}

function startServer(f: Flags): Promise<RunningRelay> {
  return startRelayServer({
    dataDir: f.dataDir,
    host: f.host ?? DEFAULT_HOST,
    port: f.port,
    ...(f.tickMs !== undefined ? { tickMs: f.tickMs } : {}),
    ...(f.graceMs !== undefined ? { graceMs: f.graceMs } : {}),
    ...(f.maxFrameBytes !== undefined ? { limits: { maxFrameBytes: f.maxFrameBytes } } : {}),
    runCreators: f.runCreators,
    ...(f.maxModelParams !== undefined ? { maxModelParams: f.maxModelParams } : {}),
    ...(f.maxRunsPerCreator !== undefined ? { maxRunsPerCreator: f.maxRunsPerCreator } : {}),
    ...(f.maxRuns !== undefined ? { maxRuns: f.maxRuns } : {}),
    joinPowBits: f.joinPowBits,
    maxIdentitiesPerAddress: f.maxIdentitiesPerAddress,
    log: {
      info: (m) => console.log(`meshtrain-relay: ${m}`),
      warn: (m) => console.error(`meshtrain-relay: warning: ${m}`),
    },
    services: true,
  });
}

/** The run to create: --config, else the embedded default when the database has no run yet. */
async function createConfiguredRun(
  running: RunningRelay,
  configText: string | undefined,
  f: Flags,
  relayKey: string,
): Promise<void> {
  const { relay } = running;
  // The embedded default run trusts the verifiers this host starts with it; a --config names its own.
  const toml =
    configText ??
    (relay.runList().length === 0 ? withTrustedVerifiers(DEFAULT_RUN_TOML, f.trustedVerifiers) : undefined);
  if (toml === undefined) return;
  const runId = parseRunConfig(toml).config.run_id;
  if (runId !== undefined && relay.run(runId)) {
    console.log(
      `meshtrain-relay: run ${runId} already exists in ${f.dataDir}; resuming it (its stored config wins)`,
    );
    return;
  }
  try {
    relay.createRun({ toml, mainAuthority: relayKey });
  } catch (e) {
    await running.close();
    if (e instanceof RelayError) throw new CliError(`run: ${e.message}`, 1);
    throw e;
  }
}

/** The relay's libp2p node unless --no-p2p; its stop function, or undefined when none runs. */
async function startLibp2p(running: RunningRelay, f: Flags): Promise<(() => Promise<void>) | undefined> {
  if (f.noP2P) return undefined;
  // Peers dial the public host; a wildcard bind address is not dialable, so announce loopback unless told.
  const bind = f.host ?? DEFAULT_HOST;
  const publicHost = f.publicHost ?? (bind === '0.0.0.0' || bind === '::' ? '127.0.0.1' : bind);
  try {
    const p2p = await startP2P(running.relay, running.server, {
      publicHost,
      publicPort: running.port,
      dataDir: f.dataDir,
    });
    for (const a of p2p.multiaddrs) console.log(`meshtrain-relay: libp2p ${a}`);
    return p2p.stop;
  } catch (e) {
    // The coordinator and HTTP paths work without libp2p (the relay is the guaranteed delivery path).
    console.error(`meshtrain-relay: warning: libp2p node not started: ${(e as Error).message}`);
    return undefined;
  }
}

/** Resolves after SIGINT or SIGTERM, once `shutdown` has finished. */
function untilSignalled(shutdown: () => Promise<void>): Promise<void> {
  return new Promise<void>((done) => {
    const stop = (signal: string) => {
      console.log(`meshtrain-relay: ${signal}, shutting down`);
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      void shutdown().finally(done);
    };
    const onInt = () => stop('SIGINT');
    const onTerm = () => stop('SIGTERM');
    process.on('SIGINT', onInt);
    process.on('SIGTERM', onTerm);
  });
}

const command: Command = {
  summary: 'start the relay: coordinator WebSocket, admin/data/checkpoint HTTP API, SQLite state',
  usage: USAGE,
  async run(argv) {
    const f = parseFlags(argv);
    const configText = checkedConfig(f.config);
    const running = await startServer(f);
    const { relay, url } = running;
    const identity = loadOrCreateRelayIdentity(f.dataDir);
    const relayKey = Buffer.from(identity.publicKey).toString('hex');
    await createConfiguredRun(running, configText, f, relayKey);
    const stopP2P = await startLibp2p(running, f);

    const wsUrl = url.replace(/^http/, 'ws');
    console.log(`meshtrain-relay: listening on ${url} (data dir ${f.dataDir})`);
    console.log(`meshtrain-relay: relay key ${relayKey} (main authority of the runs it creates)`);
    for (const h of relay.runList())
      console.log(
        `meshtrain-relay: run ${h.runId} (${h.state.run_state}, step ${h.state.progress.step}): ${wsUrl}/ws/runs/${h.runId}`,
      );

    await untilSignalled(async () => {
      try {
        await stopP2P?.();
      } finally {
        await running.close();
      }
    });
    return 0;
  },
};

export default command;
