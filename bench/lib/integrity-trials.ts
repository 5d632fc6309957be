// bench:integrity's trials: the default run's length and timers at the default verification percentage,
// honest peers and one cheater of every sampled kind from the first round, on a small model (the sampling,
// not the model, decides how soon a cheater is caught). A trial ends when every cheater is ejected, or with
// the run. Each trial has its own run seed, so its own sampling.
import { createCpuBackend } from '@meshtrain/distro';
import { modelConfigForRun } from '@meshtrain/model';
import { localDataSource } from '../../apps/node-trainer/src/net/local-data.ts';
import { InProcessNetwork, type PeerSpec } from './in-process-network.ts';
import { recordedAdversary } from './integrity-cheaters.ts';
import { FABRICATED_KINDS, trialRun, type FabricatedKind } from './integrity-config.ts';
import { join, maxVirtualSeconds, type IntegrityContext } from './integrity-detection.ts';
import type { Member } from './integrity-verdicts.ts';
import { SharedOrt } from './shared-ort.ts';

export interface Trial {
  run_seed: string;
  /** Per kind: the step at which the cheater was ejected (null: not within the run). */
  ejected_at_step: Record<string, number | null>;
  /** Per kind: fabricated results it sent before that. */
  fabricated_sent: Record<string, number>;
  steps_run: number;
  total_steps: number;
  honest_ejected: number;
  honest_replicas_identical: boolean;
  wall_seconds: number;
}

export async function runTrials(ctx: IntegrityContext, percent: number): Promise<Trial[]> {
  const f = ctx.flags;
  const kinds = f.kinds.filter((k): k is Exclude<FabricatedKind, 'dense'> => k !== 'dense');
  const run = trialRun(f, percent, f.honest + kinds.length);
  const opt = run.model.LLM.optimizer;
  if (!('Distro' in opt)) throw new Error('bench:integrity runs DisTrO runs');
  const chunk = opt.Distro.compression_chunk;
  const data = await localDataSource(ctx.dataDir, f.trialSeqLen);
  const ort = new SharedOrt(modelConfigForRun(run), f.trialSeqLen, run.meshtrain.micro_batch_size, {
    intraOpThreads: f.threads,
    spinning: false,
  });
  ctx.log(
    `trials: ${f.trials} runs of ${run.config.total_steps} steps at ${percent}% verification, ${f.trialPreset} ` +
      `${f.trialBatch}×${f.trialSeqLen} tokens per step, ${f.honest} honest peers and one ${kinds.join(', ')} cheater each`,
  );
  const trials: Trial[] = [];
  try {
    for (let t = 0; t < f.trials; t++) trials.push(await trial(t));
  } finally {
    await ort.dispose();
  }
  return trials;

  async function trial(t: number): Promise<Trial> {
    const started = performance.now();
    const seed = (0x7000 + t).toString(16).padStart(64, '0');
    const net = new InProcessNetwork(run, `integrity-trial-${t}`, () => ort.busy(), { runSeedHex: seed });
    const { hub, clock } = net;
    const t0 = clock.seconds;
    const members: Member[] = [];
    for (let i = 0; i < f.honest; i++) {
      const spec = {
        identitySeed: new Uint8Array(32).fill(i + 1),
        backend: ort.forPeer(),
        distro: createCpuBackend({ chunk }),
        data,
        shapes: ort.backend.shapes,
      };
      members.push(join(net, spec, 'honest', 'cpu'));
    }
    for (const kind of kinds) {
      const sent: Member['sent'] = [];
      const k = FABRICATED_KINDS.indexOf(kind);
      const spec: PeerSpec = {
        identitySeed: new Uint8Array(32).fill(0xa0 + k),
        backend: ort.forPeer(),
        distro: createCpuBackend({ chunk }),
        data,
        shapes: ort.backend.shapes,
        wrap: (parts, key) => recordedAdversary(kind, parts, key, 77 * t + k + 1, sent),
      };
      members.push(join(net, spec, kind, 'cpu', sent));
    }
    const cheaters = members.filter((m) => m.role !== 'honest');
    const ejectedAt = new Map<string, number>();
    const progress = ctx.progress(`trial ${t + 1}/${f.trials}`, run.config.total_steps);
    const maxSeconds = maxVirtualSeconds(run, run.config.total_steps);
    try {
      while (hub.state.run_state !== 'Finished') {
        await net.quiesce();
        for (const m of cheaters)
          if (!ejectedAt.has(m.peer.id) && hub.state.ejected.includes(m.peer.id))
            ejectedAt.set(m.peer.id, hub.state.progress.step);
        if (ejectedAt.size === cheaters.length) break;
        progress.update(hub.state.progress.step, `${ejectedAt.size}/${cheaters.length} cheaters ejected`);
        if (clock.seconds - t0 > maxSeconds)
          throw new Error(`trial ${t} did not finish in ${maxSeconds} virtual seconds`);
        clock.advance();
      }
    } finally {
      await net.stop();
    }
    progress.finish(`${ejectedAt.size}/${cheaters.length} cheaters ejected`);
    const honest = members.filter((m) => m.role === 'honest');
    // Ejected clients stop applying: only the others must agree.
    const kept = honest.filter((m) => !hub.state.ejected.includes(m.peer.id));
    const hashes = await Promise.all(
      kept.map(async (m) => Buffer.from(await m.peer.client.parameterHash()).toString('hex')),
    );
    return {
      run_seed: seed,
      ejected_at_step: Object.fromEntries(cheaters.map((m) => [m.role, ejectedAt.get(m.peer.id) ?? null])),
      fabricated_sent: Object.fromEntries(
        cheaters.map((m) => [
          m.role,
          m.sent.filter((s) => s.fabricated && s.step < (ejectedAt.get(m.peer.id) ?? Infinity)).length,
        ]),
      ),
      steps_run: hub.state.progress.step,
      total_steps: run.config.total_steps,
      honest_ejected: honest.filter((m) => hub.state.ejected.includes(m.peer.id)).length,
      honest_replicas_identical: new Set(hashes).size === 1,
      wall_seconds: (performance.now() - started) / 1000,
    };
  }
}
