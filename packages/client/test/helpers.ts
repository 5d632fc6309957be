// Shared pieces of the client tests: a run config, a small pure-TypeScript model whose gradient is exact
// arithmetic (so tests need no ONNX runtime), and a driver that runs virtual time on a LocalHub.
import { afterEach } from 'vitest';
import { DISTRO_RUN_TOML, identityFromSeed, parseRunConfig, type RunConfig } from '@meshtrain/core';
import { createCpuBackend, type DistroBackend } from '@meshtrain/distro';
import {
  Client,
  type ClientEvent,
  type CoordinatorLink,
  type DataSource,
  type ParameterMap,
  type ResidentTrainingBackend,
  type TrainingBackend,
  type TrainStepOutput,
} from '../src/index.ts';
import type { DistroTensor } from '@meshtrain/distro';
import type { LocalHub, LocalHubOptions } from '../src/testing.ts';

/** The default run's DisTrO variant (DISTRO_RUN_TOML) with `[config]` / schedule keys replaced. */
function testToml(config: Record<string, number>, extra: Record<string, string | number> = {}): string {
  let toml = DISTRO_RUN_TOML;
  for (const [k, v] of Object.entries({ ...config, ...extra })) {
    const re = new RegExp(`^${k} = .*$`, 'm');
    if (!re.test(toml)) throw new Error(`no key ${k} in the default run`);
    toml = toml.replace(re, `${k} = ${typeof v === 'string' ? v : String(v)}`);
  }
  return toml;
}

/** The default run's DisTrO variant with `[config]` / schedule keys replaced. */
export function testRun(
  config: Record<string, number>,
  extra: Record<string, string | number> = {},
): RunConfig {
  return parseRunConfig(testToml(config, extra)).config;
}

/**
 * testRun with `[model.LLM.optimizer.SparseLoCo]` instead of the default DisTrO table: `table`'s keys (TOML
 * values as written, e.g. `domain: '"dct"'`) on top of the defaults.
 */
export function sparseLoCoRun(
  config: Record<string, number>,
  table: Record<string, string | number> = {},
): RunConfig {
  const lines = Object.entries(table).map(([k, v]) => `${k} = ${String(v)}`);
  const toml = testToml(config).replace(
    /\[model\.LLM\.optimizer\.Distro\][^[]*/,
    `[model.LLM.optimizer.SparseLoCo]\n${lines.join('\n')}\n\n`,
  );
  return parseRunConfig(toml).config;
}

export const SHAPES = new Map<string, number[]>([
  ['model.embed_tokens.weight', [8, 16]],
  ['model.layers.0.mlp.up_proj.weight', [16, 8]],
  ['model.norm.weight', [16]],
]);
export const SEQ = 8;
/** A LocalHub admitting results of the toy model (SHAPES) instead of the run's preset. */
export const TOY_HUB: LocalHubOptions = {
  parameters: [...SHAPES].map(([name, shape]) => ({ name, shape })),
};

export function toyInit(): ParameterMap {
  const out: ParameterMap = new Map();
  for (const [name, shape] of SHAPES) {
    const n = shape.reduce((a, b) => a * b, 1);
    out.set(
      name,
      Float32Array.from({ length: n }, (_, j) => ((j * 37 + name.length) % 13) / 100 - 0.06),
    );
  }
  return out;
}

/**
 * loss = ½·mean((p − t)²) with a target t derived from the tokens: gradients are (p − t)/n exactly.
 * `batchWeight` scales the part of each element's target that depends on the batch (3: another batch's
 * gradient differs in sign almost everywhere; smaller: batches agree more, as a language model's do).
 * `perRow`: each row is its own batch and the loss and gradients are their means, as a language model's
 * are, so micro-batches of any size give the same gradient up to rounding (by default the target depends on
 * the whole batch at once).
 */
export function toyBackend(batchWeight = 3, perRow = false): TrainingBackend & { steps: number } {
  let params: ParameterMap = new Map();
  const b = {
    description: 'toy quadratic (TypeScript)',
    maxRows: 2,
    steps: 0,
    async loadParams(p: ParameterMap) {
      params = p;
    },
    async trainStep(tokens: Int32Array, rows: number): Promise<TrainStepOutput> {
      if (perRow && rows > 1) return meanOverRows(tokens, rows, (row) => b.trainStep(row, 1));
      b.steps++;
      let sum = 0;
      for (const t of tokens) sum += t;
      const bias = (sum / tokens.length / 255 - 0.5) * 0.1;
      let loss = 0;
      let count = 0;
      const grads: ParameterMap = new Map();
      for (const [name, p] of params) {
        const g = new Float32Array(p.length);
        for (let j = 0; j < p.length; j++) {
          // Each element's target also depends on one token of the batch, so another batch's gradient
          // differs element by element (what verification's fingerprints tell apart).
          const own = ((tokens[(j * 13 + name.length) % tokens.length] as number) / 255 - 0.5) * batchWeight;
          const target = Math.sin(j + name.length) * 0.5 + bias + own;
          const d = (p[j] as number) - target;
          loss += 0.5 * d * d;
          g[j] = d / p.length;
        }
        count += p.length;
        grads.set(name, g);
      }
      void rows;
      return { loss: loss / count, grads };
    },
  };
  return b;
}

/**
 * The toy model as a resident backend of `distro`: it reads the parameter tensors it is given and returns its
 * gradients as tensors of `distro` (on a GPU backend, the stand-in for onnxruntime-web's GPU buffers). Host
 * `loadParams`/`trainStep` calls are counted so a test can assert the client never used them.
 */
async function meanOverRows(
  tokens: Int32Array,
  rows: number,
  step: (row: Int32Array) => Promise<TrainStepOutput>,
): Promise<TrainStepOutput> {
  const width = tokens.length / rows;
  let loss = 0;
  const grads: ParameterMap = new Map();
  for (let r = 0; r < rows; r++) {
    const out = await step(tokens.subarray(r * width, (r + 1) * width));
    loss += out.loss / rows;
    for (const [name, g] of out.grads) {
      let acc = grads.get(name);
      if (!acc) grads.set(name, (acc = new Float32Array(g.length)));
      for (let j = 0; j < g.length; j++) acc[j]! += (g[j] as number) / rows;
    }
  }
  return { loss, grads };
}

export function residentToyBackend(
  distro: DistroBackend,
  maxRows: number,
  batchWeight?: number,
  perRow = false,
): ResidentTrainingBackend & { hostCalls: number; residentSteps: number; released: number } {
  const toy = toyBackend(batchWeight, perRow);
  let params: ReadonlyMap<string, DistroTensor> = new Map();
  const b = {
    description: 'toy quadratic, resident on the DisTrO backend',
    maxRows,
    residentDistro: distro,
    hostCalls: 0,
    residentSteps: 0,
    released: 0,
    async loadParams() {
      b.hostCalls++;
    },
    async trainStep(): Promise<never> {
      b.hostCalls++;
      throw new Error('host train step called on a resident backend');
    },
    async loadParamTensors(p: ReadonlyMap<string, DistroTensor>) {
      params = p;
    },
    async trainStepResident(tokens: Int32Array, rows: number) {
      b.residentSteps++;
      const host: ParameterMap = new Map();
      for (const [n, t] of params) host.set(n, await distro.read(t));
      await toy.loadParams(host);
      const out = await toy.trainStep(tokens, rows);
      const grads = new Map<string, DistroTensor>();
      for (const [n, g] of out.grads) grads.set(n, distro.tensor((params.get(n) as DistroTensor).shape, g));
      return {
        loss: out.loss,
        grads,
        release: () => {
          b.released++;
          for (const g of grads.values()) distro.release(g);
        },
      };
    },
  };
  return b;
}

export const toyData: DataSource = {
  async samples(start, end) {
    const rows = end - start + 1;
    const out = new Int32Array(rows * (SEQ + 1));
    for (let r = 0; r < rows; r++)
      for (let k = 0; k <= SEQ; k++) out[r * (SEQ + 1) + k] = ((start + r) * 31 + k * 7) % 256;
    return out;
  },
};

export interface TestPeer {
  client: Client;
  id: string;
  events: ClientEvent[];
  done: Promise<void>;
}

/** The timers every toy run of these tests shares: one long epoch, rounds that end when witnesses are in. */
export const TOY_TIMERS = {
  warmup_time: 10,
  cooldown_time: 2,
  epoch_time: 1000,
  max_round_train_time: 20,
  round_witness_time: 1,
  waiting_for_members_extra_time: 1,
  min_clients: 2,
};

/** Every peer startPeer started and nothing stopped yet: one afterEach stops them (stopPeersAfterEach). */
const started: TestPeer[] = [];

/** Stops every peer started so far and waits for their run loops to end. */
export async function stopStartedPeers(): Promise<void> {
  const peers = started.splice(0);
  for (const p of peers) p.client.stop();
  await Promise.all(peers.map((p) => p.done));
}

/** Call at a test file's top level: after each test, every peer it started is stopped. */
export function stopPeersAfterEach(): void {
  afterEach(stopStartedPeers);
}

export function startPeer(
  hub: LocalHub,
  run: RunConfig,
  seedByte: number,
  patienceMs = 300,
  parts: {
    backend?: TrainingBackend;
    distro?: DistroBackend;
    /** Wraps the peer's coordinator link (e.g. an adversary that tampers with what it submits). */
    wrapLink?: (link: CoordinatorLink, secretKey: Uint8Array) => CoordinatorLink;
    data?: DataSource;
  } = {},
): TestPeer {
  const seed = new Uint8Array(32).fill(seedByte);
  const identity = identityFromSeed(seed);
  const plain = hub.connect(identity.secretKey);
  const link = parts.wrapLink ? parts.wrapLink(plain, identity.secretKey) : plain;
  const events: ClientEvent[] = [];
  const client = new Client({
    run,
    runId: hub.runId,
    secretKey: identity.secretKey,
    link,
    backend: parts.backend ?? toyBackend(),
    distro: parts.distro ?? createCpuBackend({ chunk: 64 }),
    data: parts.data ?? toyData,
    initParams: toyInit,
    checkpoints: hub.checkpoints(),
    onEvent: (e) => events.push(e),
    fetchPatienceMs: patienceMs,
  });
  client.setShapes(SHAPES);
  const peer = { client, id: link.clientId, events, done: client.run() };
  started.push(peer);
  return peer;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Ticks virtual seconds until `until()` or `maxSeconds`, giving clients real time to work between ticks. */
export async function drive(
  hub: LocalHub,
  until: () => boolean,
  maxSeconds = 400,
  msPerSecond = 30,
): Promise<void> {
  for (let t = 0; t < maxSeconds && !until(); t++) {
    hub.advance(1);
    await sleep(msPerSecond);
  }
}
