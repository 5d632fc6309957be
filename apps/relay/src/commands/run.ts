// `meshtrain-relay run`: start the relay server. On a fresh data dir it creates the run from --config (or the
// embedded default run); on an existing one it resumes every run from its latest snapshot, so `kill -9` and
// restart continue where the relay stopped (clients reconnect and re-join).
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_RUN_TOML, parseRunConfig, RunConfigError } from '@meshtrain/core';
import { CliError, type Command } from '../command.ts';
import { loadOrCreateRelayIdentity } from '../identity.ts';
import { RelayError } from '../relay.ts';
import { defaultExtraRoutes, startP2P } from '../extras.ts';
import { startRelayServer } from '../server.ts';

const USAGE =
  '[--config run.toml] [--port P] [--host H] [--data-dir DIR] [--tick-ms 500] [--grace-ms 10000] ' +
  '[--max-frame-bytes N] [--admin-key HEX]... [--public-host NAME] [--no-p2p]';

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

const command: Command = {
  summary: 'start the relay: coordinator WebSocket, admin/data/checkpoint HTTP API, SQLite state',
  usage: USAGE,
  async run(argv) {
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
          'admin-key': { type: 'string', multiple: true },
          'no-p2p': { type: 'boolean' },
          'public-host': { type: 'string' },
        },
        strict: true,
        allowPositionals: false,
      }).values;
    } catch (err) {
      throw new CliError(`run: ${(err as Error).message}\nusage: meshtrain-relay run ${USAGE}`);
    }
    const port = intFlag('port', values.port, 0, 65535) ?? 8080;
    const tickMs = intFlag('tick-ms', values['tick-ms'], 10, 60_000);
    const graceMs = intFlag('grace-ms', values['grace-ms'], 0, 3_600_000);
    const maxFrameBytes = intFlag('max-frame-bytes', values['max-frame-bytes'], 1024, 1024 * 1024 * 1024);
    const adminKeys = values['admin-key'] ?? [];
    for (const k of adminKeys)
      if (!/^[0-9a-f]{64}$/.test(k)) throw new CliError('run: --admin-key must be 64 lowercase hex digits');
    const dataDir = resolve(values['data-dir'] ?? 'relay-data');
    const configText = values.config === undefined ? undefined : readConfig(values.config);
    if (configText !== undefined) {
      try {
        parseRunConfig(configText);
      } catch (e) {
        if (e instanceof RunConfigError) throw new CliError(`run: ${values.config}: ${e.message}`, 1);
        throw e;
      }
    }

    const running = await startRelayServer({
      dataDir,
      host: values.host ?? '127.0.0.1',
      port,
      ...(tickMs !== undefined ? { tickMs } : {}),
      ...(graceMs !== undefined ? { graceMs } : {}),
      ...(maxFrameBytes !== undefined ? { limits: { maxFrameBytes } } : {}),
      adminKeys,
      log: {
        info: (m) => console.log(`meshtrain-relay: ${m}`),
        warn: (m) => console.error(`meshtrain-relay: warning: ${m}`),
      },
      extraRoutes: (relay) => defaultExtraRoutes(relay, dataDir),
    });
    const { relay, url } = running;
    const identity = loadOrCreateRelayIdentity(dataDir);
    const relayKey = Buffer.from(identity.publicKey).toString('hex');

    // The run to create: --config, else the embedded default when the database has no run yet.
    const toml = configText ?? (relay.runList().length === 0 ? DEFAULT_RUN_TOML : undefined);
    if (toml !== undefined) {
      const runId = parseRunConfig(toml).config.run_id;
      if (runId !== undefined && relay.run(runId)) {
        console.log(
          `meshtrain-relay: run ${runId} already exists in ${dataDir}; resuming it (its stored config wins)`,
        );
      } else {
        try {
          relay.createRun({ toml, mainAuthority: relayKey });
        } catch (e) {
          await running.close();
          if (e instanceof RelayError) throw new CliError(`run: ${e.message}`, 1);
          throw e;
        }
      }
    }

    let stopP2P: (() => Promise<void>) | undefined;
    if (!values['no-p2p']) {
      // Peers dial the public host; a wildcard bind address is not dialable, so announce loopback unless told.
      const bind = values.host ?? '127.0.0.1';
      const publicHost = values['public-host'] ?? (bind === '0.0.0.0' || bind === '::' ? '127.0.0.1' : bind);
      try {
        const p2p = await startP2P(relay, running.server, { publicHost, publicPort: running.port, dataDir });
        stopP2P = p2p.stop;
        for (const a of p2p.multiaddrs) console.log(`meshtrain-relay: libp2p ${a}`);
      } catch (e) {
        // The coordinator and HTTP paths work without libp2p (the relay is the guaranteed delivery path).
        console.error(`meshtrain-relay: warning: libp2p node not started: ${(e as Error).message}`);
      }
    }

    const wsUrl = url.replace(/^http/, 'ws');
    console.log(`meshtrain-relay: listening on ${url} (data dir ${dataDir})`);
    console.log(`meshtrain-relay: relay key ${relayKey} (main authority of the runs it creates)`);
    for (const h of relay.runList())
      console.log(
        `meshtrain-relay: run ${h.runId} (${h.state.run_state}, step ${h.state.progress.step}): ${wsUrl}/ws/runs/${h.runId}`,
      );

    await new Promise<void>((done) => {
      const stop = (signal: string) => {
        console.log(`meshtrain-relay: ${signal}, shutting down`);
        process.off('SIGINT', onInt);
        process.off('SIGTERM', onTerm);
        void (async () => {
          try {
            await stopP2P?.();
          } finally {
            await running.close();
            done();
          }
        })();
      };
      const onInt = () => stop('SIGINT');
      const onTerm = () => stop('SIGTERM');
      process.on('SIGINT', onInt);
      process.on('SIGTERM', onTerm);
    });
    return 0;
  },
};

export default command;
