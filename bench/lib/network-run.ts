// A whole run of the network in one process: N real Clients (node-trainer's assembly: the ONNX train step on
// onnxruntime-node's CPU EP, DisTrO's backend on the CPU reference at the run's chunk) on core's real
// coordinator behind a LocalHub, on virtual time (virtual-time.ts). It trains the way a relay run does —
// committee and data assignment by the coordinator, witnesses and quorum, the two-round apply lag (DisTrO) or
// speculative apply (SparseLoCo), drain rounds and epoch ends — and measures what the run produced: held-out
// loss along the way and at the end, and what each peer sent. Steps are optimizer steps: a DisTrO round is
// one, a SparseLoCo round H inner steps, so curves line up with single-process AdamW's.
import type { DataSource, ParameterMap } from '@meshtrain/client';
import { bytesToHex, compressionChunkOf, innerStepsOf, type BatchId, type RunConfig } from '@meshtrain/core';
import { createCpuBackend } from '@meshtrain/distro';
import { initParameters, modelConfigForRun, parameterCount } from '@meshtrain/model';
import { InProcessNetwork, type NetPeer } from './in-process-network.ts';
import { peerTraffic, type PeerResult, type PeerTraffic } from './quality-accounting.ts';
import type { SharedOrt } from './shared-ort.ts';

export interface HeldOutBatch {
  tokens: Int32Array;
  rows: number;
}

export interface NetworkRunOptions {
  run: RunConfig;
  peers: number;
  data: DataSource;
  ort: SharedOrt;
  heldOut: readonly HeldOutBatch[];
  /**
   * Evaluate once the applied parameters include at least these optimizer steps (the first time they do;
   * SparseLoCo: inner steps).
   */
  evalSteps: readonly number[];
  /** Called at every quiet point with the coordinator's step (for progress lines). */
  onStep?: (step: number, detail: string) => void;
}

export interface CurvePoint {
  /** Optimizer steps (SparseLoCo: inner steps) whose results the evaluated parameters include. */
  step: number;
  held_out_loss: number;
  /** Mean train loss of the steps since the previous point (null at step 0). */
  train_loss: number | null;
}

export interface NetworkRunResult {
  final_held_out_loss: number;
  /** The first peer's parameters at the end (every replica's, when replicas_identical). */
  final_params: ParameterMap;
  curve: CurvePoint[];
  /**
   * Every result a peer trained, with its round step, batch (the run's data order) and the optimizer steps
   * it covers (SparseLoCo: its inner batches).
   */
  trained: { peer: number; step: number; batch: BatchId; loss: number; innerSteps: number }[];
  /** Inner steps per round: 1 for DisTrO, SparseLoCo's H. */
  inner_steps: number;
  /** Optimizer steps trained: the trained rounds' inner steps (DisTrO: the trained rounds). */
  trained_steps: number;
  peers: PeerTraffic[];
  protocol: {
    epochs: number;
    rounds: number;
    rounds_without_quorum: number;
    results_applied: number;
    batches_skipped: number;
    resyncs: number;
    errors: string[];
    refusals: number;
    /** Every replica ended with the same parameter hash. */
    replicas_identical: boolean;
    virtual_seconds: number;
  };
  wall_seconds: number;
  ort_seconds: number;
}

export async function runNetwork(o: NetworkRunOptions): Promise<NetworkRunResult> {
  const started = performance.now();
  const ortBefore = o.ort.seconds;
  const model = modelConfigForRun(o.run);
  const parameters = parameterCount(model);
  const seqLen = o.run.model.LLM.max_seq_len;
  const opt = o.run.model.LLM.optimizer;
  // Both optimizers cut tensors into chunks of this side (node-trainer's createTrainer does the same).
  const chunk = compressionChunkOf(opt);
  if (chunk === null) throw new Error('the in-process network trains DisTrO and SparseLoCo runs');
  const innerSteps = innerStepsOf(opt);
  const net = new InProcessNetwork(o.run, 'quality', () => o.ort.busy());
  const { hub, clock } = net;
  const t0 = clock.seconds;

  const peers: NetPeer[] = [];
  for (let i = 0; i < o.peers; i++)
    peers.push(
      net.addPeer({
        identitySeed: new Uint8Array(32).fill(i + 1),
        backend: o.ort.forPeer(),
        distro: createCpuBackend({ chunk }),
        data: o.data,
        shapes: o.ort.backend.shapes,
      }),
    );
  const first = peers[0] as NetPeer;

  const curve: CurvePoint[] = [
    {
      step: 0,
      held_out_loss: await o.ort.heldOutLoss(initParameters(model, o.run.meshtrain.seed), o.heldOut),
      train_loss: null,
    },
  ];
  // The coordinator step (round) each curve point was taken at, for the train losses between points.
  const curveRounds = [0];
  const pendingEvals = [...new Set(o.evalSteps)].filter((s) => s > 0).sort((a, b) => a - b);
  const trainLossAt = (from: number, to: number): number | null => {
    const losses = peers.flatMap((p) =>
      p.events.flatMap((e) => (e.type === 'trained' && e.step > from && e.step <= to ? [e.loss] : [])),
    );
    return losses.length ? losses.reduce((a, b) => a + b, 0) / losses.length : null;
  };
  // Optimizer steps a round's results cover: the most any of its results took (H; fewer only when every
  // interval of the round had fewer than H samples). Coordinator steps also count drain rounds, which train
  // nothing, so steps are counted over the rounds that trained, never derived from the step number.
  const stepsOfRound = (): Map<number, number> => {
    const m = new Map<number, number>();
    for (const p of peers)
      for (const e of p.events)
        if (e.type === 'trained') m.set(e.step, Math.max(m.get(e.step) ?? 0, e.innerSteps));
    return m;
  };
  /** The last round whose results the first replica applied, and the optimizer steps applied through it. */
  const appliedThrough = (): { round: number; steps: number } => {
    const rounds = new Set<number>();
    for (const e of first.events) if (e.type === 'applied' && e.results > 0) rounds.add(e.step);
    const of = stepsOfRound();
    let steps = 0;
    for (const r of rounds) steps += of.get(r) ?? innerSteps;
    return { round: rounds.size ? Math.max(...rounds) : 0, steps };
  };

  // Generous: every round at its timeouts, plus each epoch's warmup and cooldown.
  const cfg = o.run.config;
  const maxSeconds =
    (cfg.total_steps + 4) * (cfg.max_round_train_time + cfg.round_witness_time + 1) +
    (Math.ceil((cfg.total_steps * (cfg.max_round_train_time + cfg.round_witness_time)) / cfg.epoch_time) +
      2) *
      (cfg.warmup_time + cfg.cooldown_time + cfg.waiting_for_members_extra_time + 2);
  try {
    while (hub.state.run_state !== 'Finished') {
      await net.quiesce();
      const applied = appliedThrough();
      if (pendingEvals.length > 0 && applied.steps >= (pendingEvals[0] as number)) {
        while (pendingEvals.length > 0 && applied.steps >= (pendingEvals[0] as number)) pendingEvals.shift();
        curve.push({
          step: applied.steps,
          held_out_loss: await o.ort.heldOutLoss(await first.client.parameters(), o.heldOut),
          train_loss: trainLossAt(curveRounds.at(-1) as number, applied.round),
        });
        curveRounds.push(applied.round);
      }
      const last = curve[curve.length - 1] as CurvePoint;
      o.onStep?.(
        hub.state.progress.step,
        `epoch ${hub.state.progress.epoch} applied ${applied.steps} held-out ${last.held_out_loss.toFixed(3)}@${last.step}`,
      );
      if (clock.seconds - t0 > maxSeconds)
        throw new Error(`the run did not finish in ${maxSeconds} virtual seconds (${hub.state.run_state})`);
      clock.advance();
    }
    // Let the clients see Finished and stop.
    await net.settle();
  } finally {
    await net.stop();
  }

  const hashes = await Promise.all(peers.map(async (p) => bytesToHex(await p.client.parameterHash())));
  const finalApplied = appliedThrough();
  const prev = curve[curve.length - 1] as CurvePoint;
  const finalParams = await first.client.parameters();
  const final = await o.ort.heldOutLoss(finalParams, o.heldOut);
  if (prev.step !== finalApplied.steps)
    curve.push({
      step: finalApplied.steps,
      held_out_loss: final,
      train_loss: trainLossAt(curveRounds.at(-1) as number, finalApplied.round),
    });

  const trained = peers.flatMap((p, peer) =>
    p.events.flatMap((e) =>
      e.type === 'trained'
        ? [{ peer, step: e.step, batch: { ...e.batch }, loss: e.loss, innerSteps: e.innerSteps }]
        : [],
    ),
  );
  const results = (p: NetPeer): PeerResult[] =>
    p.events.flatMap((e) =>
      e.type === 'trained'
        ? [{ step: e.step, batch: e.batch, bytes: e.bytes, innerSteps: e.innerSteps }]
        : [],
    );
  const all = peers.flatMap((p) => p.events);
  return {
    final_held_out_loss: final,
    final_params: finalParams,
    curve,
    trained,
    inner_steps: innerSteps,
    trained_steps: [...stepsOfRound().values()].reduce((a, b) => a + b, 0),
    peers: peers.map((p) => peerTraffic(results(p), seqLen, parameters)),
    protocol: {
      epochs: hub.state.progress.epoch,
      rounds: hub.log.rounds.length,
      rounds_without_quorum: hub.log.rounds.filter((r) => !r.reached).length,
      results_applied: first.events.reduce((n, e) => n + (e.type === 'applied' ? e.results : 0), 0),
      batches_skipped: first.events.reduce((n, e) => n + (e.type === 'applied' ? e.skipped : 0), 0),
      resyncs: all.filter((e) => e.type === 'resync').length,
      errors: all.flatMap((e) => (e.type === 'error' ? [e.message.split('\n')[0] as string] : [])),
      refusals: hub.log.refusals.length,
      replicas_identical: new Set(hashes).size === 1,
      virtual_seconds: clock.seconds - t0,
    },
    wall_seconds: (performance.now() - started) / 1000,
    ort_seconds: o.ort.seconds - ortBefore,
  };
}
