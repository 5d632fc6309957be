// node-trainer train: join a run on a relay and train until it finishes. The client state machine is
// @meshtrain/client's; this shell supplies the identity, the ONNX Runtime backend on the chosen device, the
// relay link and data, a live status line (TTY) or JSON lines (--log json), and held-out evaluations at
// every model load and epoch end (so a run's progress is measured on text nobody trains on).
import {
  RelayLink,
  relayCheckpoints,
  relayDataSource,
  type ClientEvent,
  type DataSource,
} from '@meshtrain/client';
import { parseRunConfig, type CoordinatorState, type RunConfig } from '@meshtrain/core';
import { modelConfigForRun, parameterCount, parameterSizes } from '@meshtrain/model';
import { CliError, type Command } from '../command.ts';
import { parseMemory, rowsForMemory, selectDevice, type DeviceRequest } from '../backend/device.ts';
import { defaultIdentityPath, IdentityError, loadOrCreateIdentity } from '../identity/index.ts';
import { localDataSource } from '../net/local-data.ts';
import { peerFirstCheckpoints, startNodeMesh, type MeshNetwork } from '../net/p2p.ts';
import { createTrainer } from '../net/trainer.ts';
import { parseFlags } from '../options/index.ts';

const USAGE =
  '--relay URL --run-id ID [--device auto|cuda|webgpu|cpu] [--gpu-memory 6G] [--data-shard PATH] ' +
  '[--identity FILE] [--log json] [--eval-samples N]\n\n' +
  '  --relay URL        the relay, e.g. http://127.0.0.1:8080\n' +
  '  --run-id ID        the run to join\n' +
  '  --device D         auto (default): CUDA if installed, else WebGPU on a hardware adapter, else CPU\n' +
  '  --gpu-memory SIZE  memory budget (e.g. 6G): picks the micro-batch so activations fit\n' +
  "  --data-shard PATH  a prepare-data directory holding the run's dataset (instead of the relay's HTTP data)\n" +
  `  --identity FILE    key file (default ${defaultIdentityPath()})\n` +
  '  --log json         one JSON object per event on stdout instead of the status line\n' +
  '  --eval-samples N   held-out samples per evaluation (default 16; 0 disables)\n' +
  '  --no-p2p           results and checkpoints through the relay only (no libp2p node)\n' +
  '  --p2p-host H       interface the libp2p node listens on (default 0.0.0.0)';

async function fetchRun(relay: string, runId: string): Promise<{ run: RunConfig; p2p: string[] }> {
  let res: Response;
  try {
    res = await fetch(`${relay.replace(/\/+$/, '')}/api/runs/${encodeURIComponent(runId)}`);
  } catch (e) {
    throw new CliError(`cannot reach the relay at ${relay}: ${(e as Error).message}`);
  }
  if (res.status === 404)
    throw new CliError(`the relay has no run '${runId}' (GET ${relay}/api/runs lists them)`);
  if (!res.ok) throw new CliError(`GET /api/runs/${runId}: HTTP ${res.status}`);
  const body = (await res.json()) as { config?: { toml?: string }; p2p_multiaddrs?: string[] };
  if (!body.config?.toml) throw new CliError(`the relay's answer for run '${runId}' has no config`);
  return { run: parseRunConfig(body.config.toml).config, p2p: body.p2p_multiaddrs ?? [] };
}

function human(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 ** 2) return `${(bytes / 1024).toFixed(1)} KiB`;
  if (bytes < 1024 ** 3) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
}

const command: Command = {
  summary: 'join a run on a relay and train (DisTrO over ONNX Runtime) until it finishes',
  usage: USAGE,
  async run(argv) {
    const { values } = parseFlags(argv, {
      relay: { type: 'string' },
      'run-id': { type: 'string' },
      device: { type: 'string' },
      'gpu-memory': { type: 'string' },
      'data-shard': { type: 'string' },
      identity: { type: 'string' },
      log: { type: 'string' },
      'eval-samples': { type: 'string' },
      'no-p2p': { type: 'boolean' },
      'p2p-host': { type: 'string' },
    });
    if (!values.relay) throw new CliError('--relay URL is required');
    if (!values['run-id']) throw new CliError('--run-id ID is required');
    const relay = values.relay;
    const runId = values['run-id'];
    const json = values.log === 'json';
    if (values.log !== undefined && !json)
      throw new CliError(`--log: only 'json' is supported, got '${values.log}'`);
    const request = (values.device ?? 'auto') as DeviceRequest;
    if (!['auto', 'cuda', 'webgpu', 'cpu'].includes(request))
      throw new CliError(`--device: auto, cuda, webgpu or cpu, got '${request}'`);
    const evalSamples = values['eval-samples'] === undefined ? 16 : Number(values['eval-samples']);
    if (!Number.isInteger(evalSamples) || evalSamples < 0)
      throw new CliError('--eval-samples: an integer ≥ 0');

    const out = (o: Record<string, unknown>) => {
      if (json) process.stdout.write(`${JSON.stringify({ t: new Date().toISOString(), ...o })}\n`);
    };
    const say = (line: string) => {
      if (json) out({ type: 'log', message: line });
      else process.stderr.write(`${line}\n`);
    };

    let identity;
    try {
      identity = await loadOrCreateIdentity(values.identity ?? defaultIdentityPath());
    } catch (e) {
      if (e instanceof IdentityError) throw new CliError(e.message);
      throw e;
    }
    const { run, p2p } = await fetchRun(relay, runId);
    let device;
    try {
      device = await selectDevice(request);
    } catch (e) {
      throw new CliError((e as Error).message);
    }
    say(`device: ${device.device} — ${device.reason}`);
    out({ type: 'device', device: device.device, reason: device.reason });

    const seqLen = run.model.LLM.max_seq_len;
    let maxRows = run.meshtrain.micro_batch_size;
    const trainerModel = modelConfigForRun(run);
    if (values['gpu-memory']) {
      let bytes: number;
      try {
        bytes = parseMemory(values['gpu-memory']);
      } catch (e) {
        throw new CliError((e as Error).message);
      }
      maxRows = rowsForMemory(
        bytes,
        {
          hidden: trainerModel.hidden_size,
          intermediate: trainerModel.intermediate_size,
          layers: trainerModel.num_hidden_layers,
          heads: trainerModel.num_attention_heads,
          seqLen,
          params: parameterCount(trainerModel),
        },
        Math.max(1, run.config.global_batch_size_end),
      );
      say(
        `--gpu-memory ${values['gpu-memory']}: micro-batch ${maxRows} sequences (gradient accumulation above that)`,
      );
    }

    let data: DataSource;
    let evalTokens: { tokens: Int32Array; rows: number } | null = null;
    if (values['data-shard']) {
      const local = await localDataSource(values['data-shard'], seqLen);
      data = local;
      const n = Math.min(evalSamples, local.dataset.val.index.sampleCount);
      if (n > 0)
        evalTokens = { tokens: local.dataset.val.batch(Array.from({ length: n }, (_, i) => i)), rows: n };
    } else {
      data = relayDataSource(relay, runId);
      if (evalSamples > 0) {
        const res = await fetch(
          `${relay.replace(/\/+$/, '')}/api/runs/${encodeURIComponent(runId)}/data/samples?split=val&start=0&end=${evalSamples - 1}`,
        ).catch(() => null);
        if (res?.ok) {
          const buf = new Uint8Array(await res.arrayBuffer());
          const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
          const tokens = new Int32Array(buf.length / 4);
          for (let i = 0; i < tokens.length; i++) tokens[i] = view.getInt32(4 * i, true);
          evalTokens = { tokens, rows: tokens.length / (seqLen + 1) };
        } else say('no held-out split on the relay: evaluations disabled');
      }
    }

    const link = new RelayLink({
      relayUrl: relay,
      runId,
      secretKey: identity.secretKey,
      p2pPeerId: identity.peerId,
      deviceKind: `node-trainer ${device.device}`,
      onLog: say,
    });
    let state: CoordinatorState | null = null;
    link.onState((s) => {
      state = s;
    });
    // The P2P fast path: results and end-of-epoch parameters from peers, the relay as fallback.
    let network: MeshNetwork | null = null;
    if (!values['no-p2p']) {
      network = await startNodeMesh({
        relayMultiaddrs: p2p,
        seed: identity.secretKey,
        ...(values['p2p-host'] ? { host: values['p2p-host'] } : {}),
        log: say,
      }).catch((e: unknown) => {
        say(`p2p: disabled (${(e as Error).message}); using the relay for everything`);
        return null;
      });
      if (network) {
        const net = network;
        link.onState((s) => net.setState(s));
        say(`p2p: peer ${network.node.peerId} via ${p2p.length} relay address(es)`);
      } else if (p2p.length === 0)
        say('p2p: the relay offers no libp2p address; using the relay for everything');
    }
    const checkpoints = peerFirstCheckpoints({
      relay: relayCheckpoints({ relayUrl: relay, runId, model: trainerModel, secretKey: identity.secretKey }),
      relayUrl: relay,
      runId,
      network,
      sizes: parameterSizes(trainerModel),
      log: say,
    });

    let lastEval: number | null = null;
    let evaluating = Promise.resolve();
    const { client, backend } = createTrainer({
      run,
      runId,
      secretKey: identity.secretKey,
      link,
      data,
      checkpoints,
      device,
      maxRows,
      ...(network ? { peers: network } : {}),
      onEvent: (e: ClientEvent) => {
        out(e as unknown as Record<string, unknown>);
        if (
          !json &&
          (e.type === 'warning' || e.type === 'error' || e.type === 'resync' || e.type === 'paramHash')
        )
          process.stderr.write(
            `\r\x1b[K${e.type}: ${'message' in e ? e.message : 'reason' in e ? e.reason : `epoch ${e.epoch} step ${e.step} ${e.hash}`}\n`,
          );
        if ((e.type === 'model' && e.source !== 'kept') || e.type === 'paramHash') {
          // Held-out loss of the parameters as they are now (after the epoch's last apply).
          if (!evalTokens) return;
          const ev = evalTokens;
          const step = e.step;
          evaluating = evaluating.then(async () => {
            const params = await client.parameters();
            let sum = 0;
            let rows = 0;
            for (let r = 0; r < ev.rows; r += backend.maxRows) {
              const n = Math.min(backend.maxRows, ev.rows - r);
              const w = seqLen + 1;
              sum += (await backend.evalLoss(ev.tokens.subarray(r * w, (r + n) * w), n, params)) * n;
              rows += n;
            }
            lastEval = sum / rows;
            out({ type: 'eval', step, val_loss: lastEval, samples: rows });
            if (!json) process.stderr.write(`\r\x1b[Kheld-out loss ${lastEval.toFixed(4)} at step ${step}\n`);
          });
        }
      },
    });

    say(
      `joining run '${runId}' on ${relay} as ${identity.id.slice(0, 16)}… (${parameterCount(trainerModel).toLocaleString('en-US')} parameters, ${backend.description})`,
    );
    try {
      await link.connect();
    } catch (e) {
      throw new CliError(`could not join: ${(e as Error).message}`);
    }

    const tty = !json && Boolean(process.stderr.isTTY);
    const status = () => {
      const s = state as CoordinatorState | null;
      const peers = s ? s.epoch.clients.filter((c) => c.state === 'Healthy').length : 0;
      const loss = client.lastLoss === null ? '—' : client.lastLoss.toFixed(4);
      const line =
        `${client.phase.padEnd(10)} epoch ${s?.progress.epoch ?? 0} step ${s?.progress.step ?? 0}/${s?.config.total_steps ?? '?'} ` +
        `loss ${loss}${lastEval === null ? '' : ` val ${(lastEval as number).toFixed(4)}`} ` +
        `↑${human(link.stats.bytesSent)} ↓${human(link.stats.bytesReceived + client.stats.bytesFromPeers)} peers ${peers}`;
      process.stderr.write(`\r\x1b[K${line}`);
    };
    const timer = tty ? setInterval(status, 500) : null;
    const stop = () => {
      client.stop();
      link.close();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    await client.run();
    await evaluating;
    if (timer) clearInterval(timer);
    if (tty) {
      status();
      process.stderr.write('\n');
    }
    link.close();
    await backend.dispose();
    await network?.stop().catch(() => {});
    out({
      type: 'done',
      phase: client.phase,
      stats: client.stats,
      p2p: network?.stats ?? null,
      bytes_sent: link.stats.bytesSent,
      bytes_received: link.stats.bytesReceived,
    });
    if (!json)
      say(
        `done: ${client.stats.resultsSent} results sent, ${client.stats.resultsApplied} applied, ${client.stats.resyncs} re-syncs`,
      );
    return 0;
  },
};

export default command;
