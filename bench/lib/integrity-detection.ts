// bench:integrity's detection and throughput parts, on onnxruntime-node's CPU EP and DisTrO's CPU reference.
//
// Detection: `honest` peers train the default run with every result verified; once `warmupSteps` steps are
// trained, a cheater of every kind joins, and whenever one is gone (ejected) a fresh one joins under a new key
// for the next epoch, for `cheatEpochs` epochs. Every verdict is recorded with what it judged.
// Throughput: the honest peers alone, verification off and on, the same shape and steps.
import type { ClientEvent, DataSource } from '@meshtrain/client';
import type { RunConfig } from '@meshtrain/core';
import { createCpuBackend } from '@meshtrain/distro';
import { modelConfigForRun, parameterCount } from '@meshtrain/model';
import type { Progress } from '../../apps/node-trainer/src/progress/index.ts';
import { InProcessNetwork, type NetPeer, type PeerSpec } from './in-process-network.ts';
import { recordedAdversary, type SentResult } from './integrity-cheaters.ts';
import {
  FABRICATED_KINDS,
  integrityRun,
  type FabricatedKind,
  type IntegrityFlags,
} from './integrity-config.ts';
import type { Device, Member, Role } from './integrity-verdicts.ts';
import { loggingBackend, type ParamLoad } from './param-log.ts';
import { SharedOrt } from './shared-ort.ts';

export interface IntegrityContext {
  flags: IntegrityFlags;
  dataDir: string;
  /** The dataset at the detection / throughput sequence length. */
  data: DataSource;
  progress(label: string, total: number): Progress;
  log(line: string): void;
}

export interface NetworkOutcome {
  members: Member[];
  /** Coordinator ids the run ejected. */
  ejected: string[];
  /** Coordinator ids registered with the run at the end. */
  membersAtEnd: string[];
  /** Every honest replica ended with the same parameter hash. */
  honestReplicasIdentical: boolean;
  rounds: number;
  steps: number;
  epochs: number;
  resultsApplied: number;
  replays: number;
  errors: { role: string; message: string }[];
  refusals: { role: string; code: string }[];
  virtualSeconds: number;
  wallSeconds: number;
  ortSeconds: number;
}

/** A client joining `net` as `role` on `device`, its parameter loads logged (param-log.ts). */
export function join(
  net: InProcessNetwork,
  spec: PeerSpec,
  role: Role,
  device: Device,
  sent: SentResult[] = [],
): Member {
  const events: ClientEvent[] = [];
  const loads: ParamLoad[] = [];
  const peer = net.addPeer({ ...spec, events, backend: loggingBackend(spec.backend, events, loads) });
  return { peer, role, device, sent, loads };
}

function honestPeer(
  net: InProcessNetwork,
  ort: SharedOrt,
  run: RunConfig,
  data: DataSource,
  i: number,
): Member {
  const opt = run.model.LLM.optimizer;
  if (!('Distro' in opt)) throw new Error('bench:integrity runs DisTrO runs');
  const spec: PeerSpec = {
    identitySeed: new Uint8Array(32).fill(i + 1),
    backend: ort.forPeer(),
    distro: createCpuBackend({ chunk: opt.Distro.compression_chunk }),
    data,
    shapes: ort.backend.shapes,
  };
  return join(net, spec, 'honest', 'cpu');
}

/** What every run reports about the network once it stopped. */
export async function outcome(
  net: InProcessNetwork,
  members: Member[],
  started: number,
  t0: number,
  ortSeconds: number,
): Promise<NetworkOutcome> {
  const roleOf = new Map(members.map((m) => [m.peer.id, m.role as string]));
  // Ejected clients stop applying: only the others must agree.
  const honest = members.filter((m) => m.role === 'honest' && !net.hub.state.ejected.includes(m.peer.id));
  const hashes = await Promise.all(
    honest.map(async (m) => Buffer.from(await m.peer.client.parameterHash()).toString('hex')),
  );
  const first = honest[0]?.peer as NetPeer;
  return {
    members,
    ejected: [...net.hub.state.ejected],
    membersAtEnd: net.hub.state.members.map((m) => m.id),
    honestReplicasIdentical: new Set(hashes).size === 1,
    rounds: net.hub.log.rounds.length,
    steps: net.hub.state.progress.step,
    epochs: net.hub.state.progress.epoch,
    resultsApplied: first.events.reduce((n, e) => n + (e.type === 'applied' ? e.results : 0), 0),
    replays: first.events.filter((e) => e.type === 'replayed').length,
    errors: members.flatMap((m) =>
      m.peer.events.flatMap((e) =>
        e.type === 'error' ? [{ role: m.role, message: e.message.split('\n')[0] as string }] : [],
      ),
    ),
    refusals: net.hub.log.refusals.map((r) => ({ role: roleOf.get(r.id) ?? 'unknown', code: r.code })),
    virtualSeconds: net.clock.seconds - t0,
    wallSeconds: (performance.now() - started) / 1000,
    ortSeconds,
  };
}

/** Generous virtual-time bound for `steps` rounds: every round at its timeouts, every epoch's warmup too. */
export function maxVirtualSeconds(run: RunConfig, steps: number): number {
  const c = run.config;
  const round = c.max_round_train_time + c.round_witness_time + 1;
  const epochs = Math.ceil((steps * round) / c.epoch_time) + 2;
  return steps * round + epochs * (c.warmup_time + c.cooldown_time + c.waiting_for_members_extra_time + 2);
}

export interface DetectionRun extends NetworkOutcome {
  run: RunConfig;
  /** Epoch the first cheaters joined in (they train from the next). */
  firstCheatEpoch: number | null;
}

export async function runDetection(ctx: IntegrityContext): Promise<DetectionRun> {
  const f = ctx.flags;
  const kinds = FABRICATED_KINDS.filter((k) => f.kinds.includes(k));
  const bound = f.warmupSteps + (f.cheatEpochs + 3) * f.epochTime + 10;
  const run = integrityRun(f, { percent: 100, steps: bound, peers: f.honest, epochTime: f.epochTime });
  const model = modelConfigForRun(run);
  const opt = run.model.LLM.optimizer;
  if (!('Distro' in opt)) throw new Error('bench:integrity runs DisTrO runs');
  const chunk = opt.Distro.compression_chunk;
  const ort = new SharedOrt(model, f.seqLen, run.meshtrain.micro_batch_size, {
    intraOpThreads: f.threads,
    spinning: false,
  });
  const started = performance.now();
  const net = new InProcessNetwork(run, 'integrity-detection', () => ort.busy());
  const { hub, clock } = net;
  const t0 = clock.seconds;
  const members: Member[] = [];
  for (let i = 0; i < f.honest; i++) members.push(honestPeer(net, ort, run, ctx.data, i));
  ctx.log(
    `detection: ${f.preset} (${parameterCount(model).toLocaleString('en-US')} params), ${f.honest} honest peers, ` +
      `${f.batchSize}×${f.seqLen} tokens per step, every result verified; cheaters (${kinds.join(', ')}) from step ` +
      `${f.warmupSteps}, a fresh one per kind each epoch for ${f.cheatEpochs} epochs of ${f.epochTime} virtual s`,
  );

  const spawned = new Map<FabricatedKind, number>(kinds.map((k) => [k, 0]));
  const live = (kind: FabricatedKind) =>
    members.some((m) => m.role === kind && hub.state.members.some((x) => x.id === m.peer.id));
  const spawn = (kind: FabricatedKind) => {
    const n = spawned.get(kind) as number;
    spawned.set(kind, n + 1);
    const seed = new Uint8Array(32);
    seed[0] = 0xc0 + FABRICATED_KINDS.indexOf(kind);
    seed[1] = n;
    const sent: SentResult[] = [];
    const spec: PeerSpec = {
      identitySeed: seed,
      backend: ort.forPeer(),
      distro: createCpuBackend({ chunk }),
      data: ctx.data,
      shapes: ort.backend.shapes,
      wrap: (parts, key) =>
        recordedAdversary(kind, parts, key, 1000 * FABRICATED_KINDS.indexOf(kind) + n + 1, sent),
    };
    members.push(join(net, spec, kind, 'cpu', sent));
  };

  // Progress in steps; the run ends by epochs, well before `bound`.
  const progress = ctx.progress('detection', bound);
  const maxSeconds = maxVirtualSeconds(run, bound);
  let firstCheatEpoch: number | null = null;
  try {
    while (hub.state.run_state !== 'Finished') {
      await net.quiesce();
      const { step, epoch } = hub.state.progress;
      if (step >= f.warmupSteps) {
        firstCheatEpoch ??= epoch;
        if (epoch >= firstCheatEpoch + f.cheatEpochs + 1) break;
        // A dense result never passes admission, whoever sends it: one dense cheater is enough.
        if (epoch < firstCheatEpoch + f.cheatEpochs)
          for (const k of kinds) if (!live(k) && (k !== 'dense' || spawned.get(k) === 0)) spawn(k);
      }
      const cheaters = members.filter((m) => m.role !== 'honest');
      progress.update(
        step,
        `epoch ${epoch}: ${cheaters.length} cheaters joined, ` +
          `${cheaters.filter((m) => hub.state.ejected.includes(m.peer.id)).length} ejected`,
      );
      if (clock.seconds - t0 > maxSeconds)
        throw new Error(`the detection run did not finish in ${maxSeconds} virtual seconds`);
      clock.advance();
    }
    await net.quiesce();
  } finally {
    await net.stop();
  }
  progress.finish(`step ${hub.state.progress.step}`);
  const out = await outcome(net, members, started, t0, ort.seconds);
  await ort.dispose();
  return { ...out, run, firstCheatEpoch };
}

export interface ThroughputRun {
  verification_percent: number;
  steps: number;
  /** Rounds timed: from the third trained step to the last (the first ones build ONNX sessions). */
  timed_rounds: number;
  seconds_per_round: number;
  tokens_per_second: number;
  /** This process's CPU time (all threads, ONNX Runtime's included) per round: less sensitive to other load. */
  cpu_seconds_per_round: number;
  /** Verifications done per trained result (2 verifiers × the sampled share). */
  verifications_per_result: number;
  ort_seconds: number;
  wall_seconds: number;
  honest_ejected: number;
  replicas_identical: boolean;
}

/** The honest peers alone for `throughputSteps` steps at `percent` verification; wall time per round. */
export async function runThroughput(
  ctx: IntegrityContext,
  ort: SharedOrt,
  percent: number,
): Promise<ThroughputRun> {
  const f = ctx.flags;
  const run = integrityRun(f, { percent, steps: f.throughputSteps, peers: f.honest });
  const started = performance.now();
  const ortBefore = ort.seconds;
  const net = new InProcessNetwork(run, `integrity-throughput-${percent}`, () => ort.busy());
  const { hub, clock } = net;
  const t0 = clock.seconds;
  const members: Member[] = [];
  for (let i = 0; i < f.honest; i++) members.push(honestPeer(net, ort, run, ctx.data, i));
  const progress = ctx.progress(`throughput ${percent}%`, f.throughputSteps);
  /** Wall-clock time each step was first seen open. */
  const seenAt = new Map<number, { wall: number; cpu: number }>();
  const now = () => {
    const c = process.cpuUsage();
    return { wall: performance.now(), cpu: (c.user + c.system) / 1e6 };
  };
  const maxSeconds = maxVirtualSeconds(run, f.throughputSteps);
  try {
    while (hub.state.run_state !== 'Finished') {
      await net.quiesce();
      const step = hub.state.progress.step;
      if (!seenAt.has(step)) seenAt.set(step, now());
      progress.update(step);
      if (clock.seconds - t0 > maxSeconds)
        throw new Error(`the throughput run did not finish in ${maxSeconds} virtual seconds`);
      clock.advance();
    }
    seenAt.set(Infinity, now());
    await net.settle();
  } finally {
    await net.stop();
  }
  progress.finish();
  const out = await outcome(net, members, started, t0, ort.seconds - ortBefore);
  const trainedSteps = [
    ...new Set(members.flatMap((m) => m.peer.events.flatMap((e) => (e.type === 'trained' ? [e.step] : [])))),
  ].sort((a, b) => a - b);
  const from = trainedSteps[2] as number;
  const last = trainedSteps[trainedSteps.length - 1] as number;
  // A round's results are all in once the next step opens.
  const end = [...seenAt.keys()].filter((s) => s > last).sort((a, b) => a - b)[0] as number;
  const timed = last - from + 1;
  const a = seenAt.get(from) as { wall: number; cpu: number };
  const b = seenAt.get(end) as { wall: number; cpu: number };
  const seconds = (b.wall - a.wall) / 1000 / timed;
  const trained = members.flatMap((m) => m.peer.events.filter((e) => e.type === 'trained')).length;
  const verified = members.flatMap((m) => m.peer.events.filter((e) => e.type === 'verified')).length;
  return {
    verification_percent: percent,
    steps: f.throughputSteps,
    timed_rounds: timed,
    seconds_per_round: seconds,
    tokens_per_second: (f.batchSize * f.seqLen) / seconds,
    cpu_seconds_per_round: (b.cpu - a.cpu) / timed,
    verifications_per_result: trained ? verified / trained : 0,
    ort_seconds: out.ortSeconds,
    wall_seconds: out.wallSeconds,
    honest_ejected: out.ejected.length,
    replicas_identical: out.honestReplicasIdentical,
  };
}
