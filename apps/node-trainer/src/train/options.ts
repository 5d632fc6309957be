// `node-trainer train`'s flags, checked: every mistake is a CliError that names the flag.
import { CliError } from '../command.ts';
import type { DeviceRequest } from '../backend/device.ts';
import { defaultIdentityPath } from '../identity/index.ts';
import { intFlag, parseFlags } from '../options/index.ts';
import {
  ADVERSARY_USAGE,
  adversaryFlag,
  colludersFlag,
  isSybilKind,
  type AdversaryName,
} from './adversary.ts';

export const TRAIN_USAGE =
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
  "  --replica R        light (default): follow the summary of the state and fetch each closed round's\n" +
  '                     admitted list from peers (the relay as fallback); full: replay every coordinator\n' +
  '                     event and check every decision (relay traffic grows with the run)\n' +
  '  --p2p-host H       interface the libp2p node listens on (default 0.0.0.0)' +
  ADVERSARY_USAGE;

export interface TrainOptions {
  relay: string;
  runId: string;
  /** `--log json`: one JSON object per event on stdout. */
  json: boolean;
  device: DeviceRequest;
  gpuMemory?: string;
  dataShard?: string;
  identityPath: string;
  evalSamples: number;
  p2p: boolean;
  p2pHost?: string;
  /** How the relay link follows the coordinator (RelayLinkOptions.replica). */
  replica: 'full' | 'light';
  /** TEST ONLY (local-testnet): behave as this attacker (adversary.ts). */
  adversary?: AdversaryName;
  /** With a sybil kind: identities to join. */
  sybils: number;
  /** `node-trainer verify`: join to verify only (never trains or witnesses; docs/protocol.md "Trust"). */
  verifyOnly?: boolean;
  /** With `adversary: 'lying-verifier'`: ids whose results it passes. */
  colluders: string[];
}

export function parseTrainOptions(argv: string[]): TrainOptions {
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
    replica: { type: 'string' },
    adversary: { type: 'string' },
    sybils: { type: 'string' },
    colluders: { type: 'string' },
    'i-know': { type: 'boolean' },
  });
  if (!values.relay) throw new CliError('--relay URL is required');
  if (!values['run-id']) throw new CliError('--run-id ID is required');
  const json = values.log === 'json';
  if (values.log !== undefined && !json)
    throw new CliError(`--log: only 'json' is supported, got '${values.log}'`);
  const device = (values.device ?? 'auto') as DeviceRequest;
  if (!['auto', 'cuda', 'webgpu', 'cpu'].includes(device))
    throw new CliError(`--device: auto, cuda, webgpu or cpu, got '${device}'`);
  const evalSamples = values['eval-samples'] === undefined ? 16 : Number(values['eval-samples']);
  if (!Number.isInteger(evalSamples) || evalSamples < 0) throw new CliError('--eval-samples: an integer ≥ 0');
  const replica = values.replica ?? 'light';
  if (replica !== 'full' && replica !== 'light')
    throw new CliError(`--replica: full or light, got '${replica}'`);
  const adversary = adversaryFlag(values.adversary, values.relay, Boolean(values['i-know']));
  if (values.sybils !== undefined && !(adversary && isSybilKind(adversary)))
    throw new CliError('--sybils only goes with --adversary sybil, sybil-veto or sybil-idle');
  const colluders = colludersFlag(values.colluders, adversary);
  return {
    relay: values.relay,
    runId: values['run-id'],
    json,
    device,
    ...(values['gpu-memory'] ? { gpuMemory: values['gpu-memory'] } : {}),
    ...(values['data-shard'] ? { dataShard: values['data-shard'] } : {}),
    identityPath: values.identity ?? defaultIdentityPath(),
    evalSamples,
    p2p: !values['no-p2p'],
    ...(values['p2p-host'] ? { p2pHost: values['p2p-host'] } : {}),
    replica,
    ...(adversary ? { adversary } : {}),
    sybils: intFlag('sybils', values.sybils, 50, 1),
    colluders,
  };
}

/** What the trainer prints: JSON lines on stdout (`--log json`), or plain lines on stderr. */
export interface Output {
  json: boolean;
  /** One event; only printed with `--log json`. */
  out(o: Record<string, unknown>): void;
  /** One line for people (a `log` event with `--log json`). */
  say(line: string): void;
}

export function output(json: boolean): Output {
  const out = (o: Record<string, unknown>) => {
    if (json) process.stdout.write(`${JSON.stringify({ t: new Date().toISOString(), ...o })}\n`);
  };
  return {
    json,
    out,
    say: (line) => {
      if (json) out({ type: 'log', message: line });
      else process.stderr.write(`${line}\n`);
    },
  };
}
